package pluginproc

import (
	"sync"

	"golang.org/x/sys/unix"
)

// exitWatch holds the plugin's pidfd while watchExit waits on it.
type exitWatch struct {
	pidfdMu  sync.Mutex
	pidfd    int
	watching bool // false until open, and again once the exit was seen
}

// waitKernel blocks until pid exits, watching its pidfd; it returns false at
// once where pidfds are missing (then the caller polls).
func (p *Process) waitKernel(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	p.pidfdMu.Lock()
	p.pidfd, p.watching = fd, true
	p.pidfdMu.Unlock()
	defer func() {
		p.pidfdMu.Lock()
		p.watching = false
		p.pidfdMu.Unlock()
		unix.Close(fd)
	}()
	// A pidfd becomes readable when the process exits.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return true
		}
	}
}

// kernelSaysGone reports whether the watched pidfd says the process exited.
func (p *Process) kernelSaysGone() bool {
	p.pidfdMu.Lock()
	defer p.pidfdMu.Unlock()
	if !p.watching {
		return false // not watched yet, or no pidfds: Exited tells
	}
	fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}
