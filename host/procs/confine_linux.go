package procs

import (
	"os"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// startLocked starts cmd from a locked OS thread, restricted first by
// confine when it is set, and returns how to wait for it.
//
// The parent-death signal (SIGKILL, so a command dies with the host) fires
// when the *thread* that forked it ends, not the process. A confined
// command's Start and Wait both run on a thread of its own, which is never
// unlocked, so the Go runtime ends it after the wait instead of giving its
// restrictions to other goroutines; the main thread is never restricted:
// the process would stay marked with it. A thread the runtime ends after a
// confined command must never have forked anything else, so unconfined
// commands fork on spawner threads, locked for good and never ending, and
// nothing forks on the pool's threads.
//
// join, when set, moves the forking thread into the command's cgroup v1
// limits for the fork and back after it.
func startLocked(cmd *exec.Cmd, confine func() error, join *v1join) (wait func() error, err error) {
	if confine == nil {
		return startSpawner(cmd, join)
	}
	return startConfined(cmd, confine, join)
}

// startJoined is cmd.Start from inside join's cgroups.
func startJoined(cmd *exec.Cmd, join *v1join) error {
	if join == nil {
		return cmd.Start()
	}
	if err := join.enter(); err != nil {
		return err
	}
	err := cmd.Start()
	join.leave()
	return err
}

// spawners is how many threads fork unconfined commands: a few, so
// concurrent starts do not queue behind one another's exec.
var spawners = max(2, runtime.GOMAXPROCS(0))

var (
	spawnOnce sync.Once
	spawnQ    chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	join *v1join
	done chan error
}

// startSpawner starts cmd on a spawner thread; the wait, on the caller's
// goroutine, holds no thread while the command runs (see waitExited), so a
// live command costs no OS thread.
func startSpawner(cmd *exec.Cmd, join *v1join) (func() error, error) {
	spawnOnce.Do(func() {
		spawnQ = make(chan spawnReq)
		for i := 0; i < spawners; i++ {
			go spawnLoop()
		}
	})
	done := make(chan error, 1)
	spawnQ <- spawnReq{cmd, join, done}
	if err := <-done; err != nil {
		return nil, err
	}
	return func() error {
		waitExited(cmd.Process.Pid)
		return cmd.Wait()
	}, nil
}

// spawnLoop is a spawner thread. Tests that check for leaked goroutines
// ignore it (SpawnerGoroutine): it lives as long as the process, by design.
func spawnLoop() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the host
	for r := range spawnQ {
		r.done <- startJoined(r.cmd, r.join)
	}
}

// waitExited returns once pid has exited, without reaping it, parking on
// the runtime's poller (a pidfd is readable once its process exits) rather
// than in a blocking waitid, which would hold an OS thread per live
// command. Where pidfds are missing it returns at once and cmd.Wait blocks
// as before.
func waitExited(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		// Done when it exited (a pid in info) or cannot be waited on;
		// else park until the pidfd is readable.
		return err != nil || info.Signo != 0
	})
}

func startConfined(cmd *exec.Cmd, confine func() error, join *v1join) (wait func() error, err error) {
	started := make(chan error, 1)
	waited := make(chan error, 1)
	// work runs on a locked thread that is not the main one. It joins the
	// v1 cgroups before the confinement, which may forbid opening them;
	// leaving goes through files opened before.
	work := func() {
		if join != nil {
			if err := join.enter(); err != nil {
				started <- err
				return
			}
		}
		if confine != nil {
			if err := confine(); err != nil {
				if join != nil {
					join.leave()
				}
				started <- &confineError{err}
				return // the thread dies with what it got
			}
		}
		err := cmd.Start()
		if join != nil {
			join.leave()
		}
		if err != nil {
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
