//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// detachStdin moves the host's stdin out of reach of plugins: they inherit
// fd 0, and stdin belongs to the host's protocol. The returned file reads
// what stdin was.
func detachStdin() (*os.File, error) {
	fd, err := unix.Dup(0)
	if err != nil {
		return nil, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	if err := unix.Dup2(int(null.Fd()), 0); err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "stdin"), nil
}

// survivePipes keeps a reader that goes away from killing the host before
// it tears down. By default a write to a closed stdout or stderr raises
// SIGPIPE, which ends a Go program at once (runtime directory, sockets and
// spill files left behind); once SIGPIPE is notified, such writes fail
// with EPIPE instead, and the MCP session ends as at end of input. The
// signal is caught, not ignored, so commands and plugins start with its
// default disposition.
func survivePipes() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
