package procs

import (
	"runtime"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/bounded"
)

// A command's parent-death signal fires when the thread that forked it
// ends. The threads that start confined commands end after them; none of
// them may have forked a command still running: a background command
// outlives any number of confined ones started after it, on every thread
// the runtime has.
func TestConfinedThreadsKillNothingElse(t *testing.T) {
	m := newManager(t)
	bg, err := m.Spawn(Spec{Argv: []string{"sleep", "600"}, Dir: t.TempDir(), Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer bg.Kill()
	// Busy goroutines spread the work over the runtime's threads.
	stop := make(chan struct{})
	defer close(stop)
	for i := 0; i < runtime.GOMAXPROCS(0)*2; i++ {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		}()
	}
	for i := 0; i < 60; i++ {
		p, err := m.Spawn(Spec{Argv: []string{"true"}, Dir: t.TempDir(), Owner: "a", Confine: func() error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		bounded.Receive(t, p.Done(), "the process's end")
		// Unconfined ones in between, forked from whatever thread is free.
		q, err := m.Spawn(Spec{Argv: []string{"true"}, Dir: t.TempDir(), Owner: "a"})
		if err != nil {
			t.Fatal(err)
		}
		bounded.Receive(t, q.Done(), "the process's end")
		select {
		case <-bg.Done():
			t.Fatalf("after %d confined commands the background command died: %+v", i+1, bg.Result())
		default:
		}
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case <-bg.Done():
		t.Fatalf("the background command died: %+v", bg.Result())
	default:
	}
}
