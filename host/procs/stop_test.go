//go:build linux

package procs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// KillCall ends the trees of one call's processes (SIGTERM with the grace,
// or SIGKILL at once when hard, even over a grace already running), and
// no other process; KillDetached only what the call left running on its
// own; KillAll then ends the rest and refuses new ones.
func TestKillCallThenKillAll(t *testing.T) {
	m := newManager(t)
	spawn := func(call, script string) *Process {
		t.Helper()
		p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", script}, Dir: t.TempDir(), Owner: "test", Call: call, Grace: time.Minute, Detached: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	done := func(p *Process, within time.Duration) bool {
		if within == 0 {
			select {
			case <-p.Done():
				return true
			default:
				return false
			}
		}
		select {
		case <-p.Done():
			return true
		case <-time.After(within):
			return false
		}
	}
	dir := t.TempDir()
	term, err := m.SpawnTerminal(TerminalSpec{Argv: []string{"bash", "-c", "sleep 100"}, Dir: dir, Owner: "test", Call: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	loose, err := m.SpawnTerminal(TerminalSpec{Argv: []string{"bash", "-c", "sleep 100"}, Dir: dir, Owner: "test", Call: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	// KillDetached spares a terminal a session claimed, not one nobody
	// claimed, and a process the call waits on.
	term.Claim()
	waited, err := m.Spawn(Spec{Argv: []string{"sleep", "100"}, Dir: dir, Owner: "test", Call: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := m.KillDetached("t1"); n != 1 || !done(loose.p, 20*time.Second) {
		t.Fatalf("KillDetached signalled %d, and the unclaimed terminal did not end", n)
	}
	if done(term.p, 0) || done(waited, 0) {
		t.Fatalf("KillDetached ended a claimed terminal or a waited process: %+v %+v", term.p.Result(), waited.Result())
	}
	polite := spawn("c1", "touch "+dir+"/1; sleep 100")
	stubborn := spawn("c2", "trap '' TERM; touch "+dir+"/2; sleep 100")
	other := spawn("", "touch "+dir+"/3; sleep 100")
	for _, name := range []string{"1", "2", "3"} {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a command never started")
			}
		}
	}
	if n := m.KillDetached("c1"); n != 1 || !done(polite, 20*time.Second) {
		t.Fatalf("KillDetached(c1) signalled %d and the process did not end on SIGTERM", n)
	}
	if n := m.KillCall("t1", false); n != 2 || !done(term.p, 20*time.Second) || !done(waited, 20*time.Second) {
		t.Fatalf("KillCall(t1) signalled %d and its terminal or waited process did not end", n)
	}
	if r := polite.Result(); r.Signal != "SIGTERM" {
		t.Fatalf("c1 ended %q, want SIGTERM", r.Signal)
	}
	m.KillCall("c2", false) // ignored: its grace is a minute
	if done(stubborn, 300*time.Millisecond) {
		t.Fatalf("c2 ended on a SIGTERM it ignores: %+v", stubborn.Result())
	}
	if m.KillCall("c2", true); !done(stubborn, 20*time.Second) {
		t.Fatal("a hard KillCall left c2 to its grace")
	}
	if r := stubborn.Result(); r.Signal != "SIGKILL" {
		t.Fatalf("c2 ended %q, want SIGKILL", r.Signal)
	}
	if done(other, 0) {
		t.Fatal("KillCall ended a process of no call")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.KillAll(ctx); err != nil || !done(other, 0) {
		t.Fatalf("KillAll: %v", err)
	}
	if _, err := m.Spawn(Spec{Argv: []string{"true"}, Dir: t.TempDir()}); err == nil {
		t.Fatal("a spawn after KillAll started")
	}
}

// A detached process whose start was on its way when KillDetached ended its
// call is killed as it is entered; a process the call waits on, and other
// calls' processes, are not.
func TestKillDetachedThenALateStart(t *testing.T) {
	m := newManager(t)
	m.KillDetached("c1")
	late, err := m.Spawn(Spec{Argv: []string{"sleep", "100"}, Dir: t.TempDir(), Owner: "test", Call: "c1", Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-late.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("a detached process of an ended call kept running")
	}
	for _, spec := range []Spec{
		{Argv: []string{"sleep", "100"}, Dir: t.TempDir(), Owner: "test", Call: "c1"},
		{Argv: []string{"sleep", "100"}, Dir: t.TempDir(), Owner: "test", Call: "c2", Detached: true},
	} {
		p, err := m.Spawn(spec)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
			t.Fatalf("%+v ended: %+v", spec, p.Result())
		case <-time.After(200 * time.Millisecond):
		}
		p.Kill()
	}
}
