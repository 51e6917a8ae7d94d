//go:build unix

package procs

import (
	"os/exec"
	"syscall"
)

// startTree starts cmd from a locked thread (startLocked); the tree is
// the session it leads (and its cgroup, on Linux).
func (p *Process) startTree(cmd *exec.Cmd) (func() error, error) {
	return startLocked(cmd, p.spec.Confine, p.forkJoin())
}

// exitSignal is the signal that ended the main process, if one did.
func (p *Process) exitSignal(ee *exec.ExitError) (syscall.Signal, bool) {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return ws.Signal(), true
	}
	return 0, false
}
