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

// Join is one subscription to every source: its channel gets a signal
// after a change of any (one first signal for all, as Subscribe gives),
// and stop ends every source's subscription.
func Join(sources ...func() (<-chan struct{}, func())) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	out <- struct{}{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	stops := make([]func(), 0, len(sources))
	for _, src := range sources {
		ch, stop := src()
		stops = append(stops, stop)
		// The source's own first signal is the one out holds already.
		select {
		case <-ch:
		default:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case _, ok := <-ch:
					if !ok {
						return
					}
					select {
					case out <- struct{}{}:
					default:
					}
				case <-done:
					return
				}
			}
		}()
	}
	var once sync.Once
	return out, func() {
		once.Do(func() {
			close(done)
			for _, stop := range stops {
				stop()
			}
			wg.Wait()
			close(out)
		})
	}
}
