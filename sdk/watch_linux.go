package sdk

import (
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// watchHost returns when the host named by EnvHostPID dies, then disposes and
// exits. The host also gives every plugin a parent-death signal; this watch
// covers what that signal cannot (it is tied to the forking thread, and a
// plugin started by something else than its host gets none).
func watchHost(logger hclog.Logger, l *lifecycle) {
	pid, err := strconv.Atoi(os.Getenv(EnvHostPID))
	if err != nil || pid <= 1 {
		return
	}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		// A pidfd becomes readable when the process exits.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
		_ = unix.Close(fd)
		l.onHostGone(logger)
		return
	}
	// No pidfd (old kernel): poll the parent.
	for range time.Tick(500 * time.Millisecond) {
		if os.Getppid() != pid {
			l.onHostGone(logger)
			return
		}
	}
}
