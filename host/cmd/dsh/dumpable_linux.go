package main

import "golang.org/x/sys/unix"

// noDump makes the host non-dumpable: its /proc files (environ with the
// credentials it scrubs from commands, fd, mem) are root's, out of reach
// of a confined command without capabilities, even one running as root.
func noDump() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
