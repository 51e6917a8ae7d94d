//go:build !unix

package kubeexec

import "syscall"

// dieOf does nothing where a process cannot signal itself: the relay
// exits with the command's code.
func dieOf(syscall.Signal) {}
