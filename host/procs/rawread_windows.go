package procs

import "syscall"

// rawRead is one read of a pipe's handle.
func rawRead(fd uintptr, b []byte) (int, error) { return syscall.Read(syscall.Handle(fd), b) }
