package procs

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/dshrun/dsh/host/watchdog"
)

// The watchdog covers the one case the host cannot: its own SIGKILL. A
// parent-death signal reaches only direct children, and commands that
// called setsid or double-forked are nobody's children. So the host starts
// a small watchdog process (dsh_watchdog, in its own session) holding the
// read end of a pipe; when the host dies, for whatever reason, the pipe
// closes and the watchdog kills the host's cgroup: every command tree in it.
//
// A command runs as the host's user and can kill the watchdog too; the host
// notices (it is the watchdog's parent) and starts a new one at once. The
// watchdog gets the minimal environment plugins get: it needs no secret, and
// /proc/PID/environ would show any it had.

// watchdogProc is the running watchdog and what restarts it.
type watchdogProc struct {
	m   *Manager
	exe string
	env []string

	mu      sync.Mutex
	pid     int
	pipe    *os.File // write end of the current watchdog's stdin
	exited  chan struct{}
	stopped bool

	stop chan struct{} // closed by stopWatchdog
	done chan struct{} // closed when the restarting loop ended
}

// StartWatchdog starts `exe __watchdog` guarding this manager's cgroups,
// and starts a new one whenever it dies until the manager closes. It is a
// no-op without cgroups.
func (m *Manager) StartWatchdog(exe string) error {
	if m.cg == nil || exe == "" {
		return nil
	}
	w := &watchdogProc{
		m:    m,
		exe:  exe,
		env:  MinimalEnv(func(k string) (string, bool) { v, ok := m.ambient[k]; return v, ok }),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if err := w.start(); err != nil {
		return err
	}
	m.watchdog = w
	go w.keep()
	return nil
}

// WatchdogPid is the current watchdog's pid; 0 when none runs.
func (m *Manager) WatchdogPid() int {
	if m.watchdog == nil {
		return 0
	}
	m.watchdog.mu.Lock()
	defer m.watchdog.mu.Unlock()
	return m.watchdog.pid
}

func (w *watchdogProc) start() error {
	r, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog pipe: %w", err)
	}
	cmd := exec.Command(w.exe, WatchdogArg, w.m.cg.dir)
	cmd.Env = w.env
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		pw.Close()
		return fmt.Errorf("start the watchdog %s: %w", w.exe, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	w.mu.Lock()
	w.pid, w.pipe, w.exited = cmd.Process.Pid, pw, exited
	w.mu.Unlock()
	return nil
}

// keep starts a new watchdog whenever the current one dies, at once the
// first time and backing off while they keep dying young.
func (w *watchdogProc) keep() {
	defer close(w.done)
	var delay time.Duration
	for {
		w.mu.Lock()
		exited, pid, pipe := w.exited, w.pid, w.pipe
		w.mu.Unlock()
		began := time.Now()
		select {
		case <-w.stop:
			return
		case <-exited:
		}
		_ = pipe.Close()
		w.mu.Lock()
		w.pid = 0
		w.mu.Unlock()
		if time.Since(began) < time.Second {
			delay = min(max(2*delay, 100*time.Millisecond), 30*time.Second)
		} else {
			delay = 0
		}
		w.m.log.Error("the watchdog died: command trees would outlive a killed host; starting a new one", "pid", pid, "retry_in", delay)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(delay):
			}
			err := w.start()
			if err == nil {
				w.m.log.Warn("watchdog started again", "pid", w.m.WatchdogPid(), "previous_pid", pid)
				break
			}
			delay = min(max(2*delay, 100*time.Millisecond), 30*time.Second)
			w.m.log.Error("no watchdog: command trees would outlive a killed host", "error", err, "retry_in", delay)
		}
	}
}

// stopWatchdog lets the watchdog go (it finds nothing left to kill).
func (m *Manager) stopWatchdog() {
	w := m.watchdog
	if w == nil {
		return
	}
	close(w.stop)
	<-w.done
	w.mu.Lock()
	pipe, exited := w.pipe, w.exited
	w.mu.Unlock()
	_ = pipe.Close()
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
	}
}

// RunWatchdog is the watchdog's body (host/watchdog): wait for stdin
// to close, then kill and remove every cgroup under dir. dir must be a dsh
// cgroup root.
func RunWatchdog(dir string) error { return watchdog.Run(dir) }
