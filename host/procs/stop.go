package procs

import (
	"context"
	"time"
)

// KillCall terminates the trees of every running process that serves
// call (SIGTERM, then SIGKILL after each one's grace; hard skips the
// grace), so that whoever waits on them gets their output and how they
// ended. It returns how many it signalled.
func (m *Manager) KillCall(call string, hard bool) int {
	return m.killCall(call, hard, true)
}

// KillDetached is KillCall (with the grace) for what call left running
// on its own: its detached processes and the terminals no terminal
// session claimed. A process the call waits on ends with the call's own
// cancellation (and says so), and a claimed terminal's shell outlives the
// call that opened it: its owner finds it among its sessions. The call is
// over: a detached process started for it afterwards (a start that was
// on its way) is killed as it is entered.
func (m *Manager) KillDetached(call string) int {
	return m.killCall(call, false, false)
}

// endedKeep is how long a call KillDetached ended is remembered: longer
// than any start still on its way.
const endedKeep = time.Minute

// endedLocked reports whether KillDetached ended call; m.mu is held.
func (m *Manager) endedLocked(call string) bool {
	if call == "" {
		return false
	}
	_, ok := m.ended[call]
	return ok
}

func (m *Manager) killCall(call string, hard, all bool) int {
	if call == "" {
		return 0
	}
	var ps []*Process
	m.mu.Lock()
	if !all {
		now := time.Now()
		for c, at := range m.ended {
			if now.Sub(at) > endedKeep {
				delete(m.ended, c)
			}
		}
		if m.ended == nil {
			m.ended = map[string]time.Time{}
		}
		m.ended[call] = now
	}
	for id, p := range m.procs {
		if p.spec.Call != call || p.finished() {
			continue
		}
		t := m.terms[id]
		if all || t == nil && p.spec.Detached || t != nil && !t.Claimed() {
			ps = append(ps, p)
		}
	}
	m.mu.Unlock()
	n := 0
	for _, p := range ps {
		if hard {
			p.killNow()
		}
		if p.kill(hard) {
			n++
		}
	}
	return n
}

// killNow sends SIGKILL to the tree at once, even when a kill with a grace
// is already under way (kill alone would leave that one to finish).
func (p *Process) killNow() {
	if !p.finished() {
		go p.killTree()
	}
}

// KillAll refuses new processes and kills every process now (SIGKILL to
// each tree, those already given a grace included), waiting for them (bounded by ctx). Unlike Close it keeps
// the spill files and the cgroups, and the processes stay readable until
// Close.
func (m *Manager) KillAll(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	ps := make([]*Process, 0, len(m.procs))
	for _, p := range m.procs {
		p.killNow()
		ps = append(ps, p)
	}
	m.mu.Unlock()
	return killAll(ctx, ps)
}
