package sdk

import "golang.org/x/sys/unix"

// noDump makes the plugin non-dumpable: its /proc files (environ, fd,
// mem) are root's, out of reach of a confined command without
// capabilities, even one running as root; no core dump holds its secrets.
func noDump() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
