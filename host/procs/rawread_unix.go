//go:build unix

package procs

import "syscall"

// rawRead is one read(2) of a pipe's descriptor.
func rawRead(fd uintptr, b []byte) (int, error) { return syscall.Read(int(fd), b) }
