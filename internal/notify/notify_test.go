package notify

import (
	"testing"
	"time"
)

func TestCoalescedAndNeverBlocking(t *testing.T) {
	var s Set
	s.Fire() // nobody watches: nothing to do
	ch, stop := s.Subscribe()
	select {
	case <-ch:
	default:
		t.Fatal("a new watcher has no first signal")
	}
	for range 100 {
		s.Fire()
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no signal after changes")
	}
	select {
	case <-ch:
		t.Fatal("a burst of changes signalled more than once")
	default:
	}
	stop()
	stop()
	if _, ok := <-ch; ok {
		t.Fatal("channel open after stop")
	}
	s.Fire()
	if s.n.Load() != 0 {
		t.Fatalf("%d watchers left after stop", s.n.Load())
	}
}

func TestJoin(t *testing.T) {
	var a, b Set
	ch, stop := Join(a.Subscribe, b.Subscribe)
	select {
	case <-ch:
	default:
		t.Fatal("a join has no first signal")
	}
	select {
	case <-ch:
		t.Fatal("a join's sources each gave a first signal")
	case <-time.After(50 * time.Millisecond):
	}
	for _, s := range []*Set{&a, &b} {
		s.Fire()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("no signal after a source's change")
		}
	}
	stop()
	stop()
	if _, ok := <-ch; ok {
		t.Fatal("the join's channel is open after stop")
	}
	if a.n.Load() != 0 || b.n.Load() != 0 {
		t.Fatal("stop left the sources watched")
	}
}
