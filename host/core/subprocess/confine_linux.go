package subprocess

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startLocked starts cmd from a locked OS thread, restricted first by
// confine when it is set, and returns how to wait for it. Start and Wait
// both run on that thread, which is never unlocked, so the Go runtime ends
// it after the wait instead of giving its restrictions to other
// goroutines.
//
// Every command starts this way, confined or not: the parent-death signal
// (SIGKILL, so a command dies with the host) fires when the *thread* that
// forked it ends, not the process. A thread the runtime ends after a
// confined command must never have forked anything else, so nothing forks
// on the pool's threads, and each forking thread lives exactly as long as
// its child. The main thread is never restricted: the process would stay
// marked with it.
func startLocked(cmd *exec.Cmd, confine func() error) (wait func() error, err error) {
	started := make(chan error, 1)
	waited := make(chan error, 1)
	// work runs on a locked thread that is not the main one.
	work := func() {
		if confine != nil {
			if err := confine(); err != nil {
				started <- &confineError{err}
				return // the thread dies with what it got
			}
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}
	var run func(moved chan struct{})
	run = func(moved chan struct{}) {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread: nothing is restricted yet. It stays held
			// until the work has a thread of its own, so the retry cannot
			// land on it again (with one P it would, forever), and is then
			// given back.
			next := make(chan struct{})
			go run(next)
			<-next
			runtime.UnlockOSThread()
			return
		}
		if moved != nil {
			close(moved)
		}
		work()
	}
	go run(nil)
	if err := <-started; err != nil {
		return nil, err
	}
	return func() error { return <-waited }, nil
}
