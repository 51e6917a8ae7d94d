package procs

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/dshrun/dsh/core/subprocess"
)

// trees is the Manager's side of tree tracking on Linux: the cgroup root
// its commands' cgroups live under (nil without cgroups), and the watchdog
// that kills them if the host is SIGKILLed.
type trees struct {
	cg       *cgroupRoot
	watchdog *watchdogProc // nil until StartWatchdog
}

// procTree is a Process's side: its cgroup until it goes back to the pool;
// cgMu keeps a late signal from reaching the next command in a reused
// cgroup.
type procTree struct {
	cgMu sync.Mutex
	cg   *cgroup
	// join moves the forking thread into the tree's v1 cgroups, where
	// limits are enforced by cgroup v1.
	join *v1join
}

func (m *Manager) openTrees() {
	if m.cfg.NoCgroup {
		m.limits = LimitsStatus{Reason: "per-command cgroups are disabled"}
		return
	}
	name := fmt.Sprintf("dsh-%d-%d", os.Getpid(), time.Now().UnixNano())
	cg, err := newCgroupRoot(name)
	if err != nil {
		m.log.Warn("no per-command cgroups; process trees are tracked by process group only, which misses setsid children", "error", err)
		m.limits = LimitsStatus{Reason: "no per-command cgroups: " + err.Error()}
		m.log.Warn("no limits on the processes and memory of commands", "reason", m.limits.Reason)
		return
	}
	m.cg = cg
	cg.lim = openLimits(cg, name, m.cfg.Limits)
	m.limits = cg.lim.status
	switch {
	case !m.limits.Available:
		m.log.Warn("no limits on the processes and memory of commands", "reason", m.limits.Reason)
	case m.limits.Reason != "":
		m.log.Warn("commands are limited in part", "limits", m.limits.String())
	default:
		m.log.Debug("commands are limited", "limits", m.limits.String())
	}
}

func (m *Manager) closeTrees() {
	if m.cg != nil {
		m.cg.close()
	}
	m.stopWatchdog()
}

// Cgroups reports whether whole trees are tracked with cgroups.
func (m *Manager) Cgroups() bool { return m.cg != nil }

// sysProcAttr puts the command in a new session: its own process group and
// no controlling terminal, so nothing can prompt on the user's tty. The
// parent-death signal ends the command if the host dies, and
// CLONE_INTO_CGROUP starts it in its own cgroup.
func (p *Process) sysProcAttr() (*syscall.SysProcAttr, error) {
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if p.m.cg != nil {
		cg, err := p.m.cg.child()
		if err != nil {
			return nil, err
		}
		if err := p.m.cg.lim.apply(cg, p.spec.Limits.resolve(p.m.cg.lim.def)); err != nil {
			cg.remove()
			return nil, err
		}
		p.cg = cg
		p.join = p.m.cg.lim.join(cg)
		attr.UseCgroupFD, attr.CgroupFD = true, cg.fd
	}
	return attr, nil
}

// forkJoin is how the forking thread joins the tree's v1 cgroups, or nil.
func (p *Process) forkJoin() *v1join { return p.join }

// limitHits reads which limits stopped something in the tree, once it has
// ended; a cgroup where one did is not pooled.
func (p *Process) limitHits() []*subprocess.LimitHit {
	p.cgMu.Lock()
	defer p.cgMu.Unlock()
	if p.cg == nil {
		return nil
	}
	return p.m.cg.lim.hits(p.cg)
}

// releaseTree gives the command's cgroup back; signals sent to the tree
// afterwards go nowhere.
func (p *Process) releaseTree() {
	p.cgMu.Lock()
	defer p.cgMu.Unlock()
	if p.cg != nil {
		p.m.cg.release(p.cg)
		p.cg, p.join = nil, nil
	}
}

// treeSigkilled notes that the main process died of SIGKILL, perhaps by a
// write to its own cgroup.kill: that cgroup is poisoned (see
// cgroup.killed), so it must not be pooled.
func (p *Process) treeSigkilled() {
	p.cgMu.Lock()
	if p.cg != nil {
		p.cg.killed = true
	}
	p.cgMu.Unlock()
}

func (p *Process) signalTree(sig syscall.Signal) {
	p.cgMu.Lock()
	defer p.cgMu.Unlock()
	if p.cg != nil {
		p.cg.signal(sig)
		return
	}
	if p.m.cg == nil && !p.finished() {
		signalGroup(p.Pid, sig)
	}
}

func (p *Process) killTree() {
	p.cgMu.Lock()
	defer p.cgMu.Unlock()
	if p.cg != nil {
		p.cg.killAndWait(2 * time.Second)
		return
	}
	if p.m.cg == nil {
		signalGroup(p.Pid, syscall.SIGKILL)
	}
}
