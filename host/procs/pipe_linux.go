package procs

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe raises a pipe's capacity to bigPipe. Only streams that pour
// output get it: big pipes count against the user's pipe-user-pages-soft.
// Where the kernel refuses, the pipe stays as it was.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, bigPipe)
		})
	}
}
