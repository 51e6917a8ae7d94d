package subprocess

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startConfined starts cmd from a locked OS thread that confine has
// restricted, and returns how to wait for it: Start and Wait both run on
// that thread (the parent-death signal is the forking thread's), which is
// never unlocked, so the Go runtime ends it instead of giving its
// restrictions to other goroutines. The main thread is never restricted:
// the process would stay marked with it.
func startConfined(cmd *exec.Cmd, confine func() error) (wait func() error, err error) {
	started := make(chan error, 1)
	waited := make(chan error, 1)
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread: nothing is restricted yet, so it may be
			// given back; the work moves to another thread.
			runtime.UnlockOSThread()
			go run()
			return
		}
		if err := confine(); err != nil {
			started <- &confineError{err}
			return // the thread dies with what it got
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}
	go run()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() error { return <-waited }, nil
}
