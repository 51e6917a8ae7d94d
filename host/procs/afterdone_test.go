//go:build linux

package procs

import (
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/bounded"
)

// AfterDone runs once the process is done, with its output collected; one
// stopped before that never runs; one asked after runs at once. A process
// that never started (Settled) is done from the first.
func TestAfterDone(t *testing.T) {
	m := newManager(t)
	p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", "echo hi; sleep 600"}, Dir: t.TempDir(), Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan Result, 1)
	p.AfterDone(func() {
		select {
		case <-p.Done():
		default:
			t.Error("AfterDone ran before Done")
		}
		ran <- p.Result()
	})
	stopped := make(chan struct{}, 1)
	stop := p.AfterDone(func() { stopped <- struct{}{} })
	select {
	case <-ran:
		t.Fatal("AfterDone ran while the process runs")
	case <-time.After(100 * time.Millisecond):
	}
	if !stop() {
		t.Fatal("stop before the end did not stop")
	}
	if stop() {
		t.Fatal("a second stop stopped again")
	}
	p.Kill()
	select {
	case r := <-ran:
		if r.Status != Killed || string(r.Stdout.Data) != "hi\n" {
			t.Fatalf("result after the kill: %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("AfterDone did not run after the kill")
	}
	select {
	case <-stopped:
		t.Fatal("a stopped AfterDone ran")
	case <-time.After(100 * time.Millisecond):
	}

	late := make(chan struct{})
	if p.AfterDone(func() { close(late) })() {
		t.Fatal("stop of one asked after the end said it stopped it")
	}
	bounded.Receive(t, late, "the func given after the end")

	s := m.Settled(Spec{Owner: "test"}, errTest)
	settled := make(chan struct{})
	s.AfterDone(func() { close(settled) })
	bounded.Receive(t, settled, "the func of a process that never started")
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("never started")
