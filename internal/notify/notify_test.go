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
