//go:build !linux

package testplugins

import (
	"fmt"
	"runtime"
)

// The process listings read /proc (procs_linux.go). Elsewhere they fail
// loudly rather than find nothing, which would let every "nothing is left
// running" check pass.
var errNoProc = fmt.Sprintf("testplugins: listing processes needs /proc, which %s lacks", runtime.GOOS)

// Running returns the pids of live processes whose executable is in dir.
func Running(dir string) []int { panic(errNoProc) }

// Matching lists the live processes whose command line contains marker.
func Matching(marker string) []string { panic(errNoProc) }

// Alive reports whether pid is a live process (not a zombie).
func Alive(pid int) bool { panic(errNoProc) }
