// Package notify is a coalesced change signal for watchers that come and
// go (the console's pages): Fire never blocks and costs one atomic load
// while nobody watches; each watcher's channel holds at most one pending
// signal, so a burst of changes wakes it once.
package notify

import (
	"sync"
	"sync/atomic"
)

// Set is the watchers of one kind of change. The zero value is ready.
type Set struct {
	n    atomic.Int32 // len(subs), read without the lock by Fire
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives a value after each change (at
// most one pending) and stop, which closes it. A new channel holds one
// signal at once, so a watcher reads the current state first.
func (s *Set) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	ch <- struct{}{}
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[chan struct{}]struct{}{}
	}
	s.subs[ch] = struct{}{}
	s.n.Store(int32(len(s.subs)))
	s.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, ch)
			s.n.Store(int32(len(s.subs)))
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Fire tells every watcher something changed, without waiting on any.
func (s *Set) Fire() {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
