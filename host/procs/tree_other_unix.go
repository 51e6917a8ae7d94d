//go:build unix && !linux

package procs

import "syscall"

// Without cgroups (macOS, the BSDs) a command's tree is its session's
// process group: setsid and double-forked children escape it, and with no
// parent-death signal and no watchdog nothing kills commands if the host
// itself is SIGKILLed.
type (
	trees    struct{}
	procTree struct{}
)

func (m *Manager) openTrees() {
	m.log.Debug("no cgroups on this system; process trees are tracked by process group only, which misses setsid children")
}

func (m *Manager) closeTrees() {}

// Cgroups reports whether whole trees are tracked with cgroups: never here.
func (m *Manager) Cgroups() bool { return false }

// sysProcAttr puts the command in a new session: its own process group and
// no controlling terminal, so nothing can prompt on the user's tty.
func (p *Process) sysProcAttr() (*syscall.SysProcAttr, error) {
	return &syscall.SysProcAttr{Setsid: true}, nil
}

func (p *Process) releaseTree()   {}
func (p *Process) treeSigkilled() {}

func (p *Process) signalTree(sig syscall.Signal) {
	if !p.finished() {
		signalGroup(p.Pid, sig)
	}
}

func (p *Process) killTree() { signalGroup(p.Pid, syscall.SIGKILL) }
