//go:build unix

package procs

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// signalGroup signals the process group led by pid (a command started
// with Setsid leads its own).
func signalGroup(pid int, sig syscall.Signal) { _ = syscall.Kill(-pid, sig) }

func signalName(sig syscall.Signal) string { return unix.SignalName(sig) }
