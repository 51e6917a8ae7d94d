package subprocess

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// The watchdog covers the one case the host cannot: its own SIGKILL. A
// parent-death signal reaches only direct children, and commands that
// called setsid or double-forked are nobody's children. So the host starts
// a small watchdog process (the dsh binary, in its own session) holding the
// read end of a pipe; when the host dies, for whatever reason, the pipe
// closes and the watchdog kills the host's cgroup: every command tree in it.

// WatchdogArg is the hidden dsh subcommand that runs the watchdog.
const WatchdogArg = "__watchdog"

// StartWatchdog starts `exe __watchdog` guarding this manager's cgroups.
// It is a no-op without cgroups. The watchdog exits when the manager
// closes.
func (m *Manager) StartWatchdog(exe string) error {
	if m.cg == nil || exe == "" {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, WatchdogArg, m.cg.dir)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	m.watchdog = w
	m.watchdogDone = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(m.watchdogDone)
	}()
	return nil
}

// stopWatchdog lets the watchdog go (it finds nothing left to kill).
func (m *Manager) stopWatchdog() {
	if m.watchdog == nil {
		return
	}
	_ = m.watchdog.Close()
	select {
	case <-m.watchdogDone:
	case <-time.After(3 * time.Second):
	}
}

// RunWatchdog is the watchdog's body: wait for stdin to close, then kill
// and remove every cgroup under dir. dir must be a dsh cgroup root.
func RunWatchdog(dir string) error {
	if filepath.Base(dir) == "" || !isDshCgroup(dir) {
		return errors.New("watchdog: not a dsh cgroup: " + dir)
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // returns when the host is gone
	root := &cgroupRoot{dir: dir}
	// cgroup.kill on the root kills every descendant at once.
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	root.close()
	return nil
}

func isDshCgroup(dir string) bool {
	mnt, err := findCgroup2()
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(mnt, dir)
	return err == nil && filepath.Dir(rel) == "." && len(rel) > 4 && rel[:4] == "dsh-"
}
