package shellenv

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dshrun/dsh/sdk"
)

// Follower keeps the latest snapshot of an Env through Watch, so a
// consumer that needs one on every command reads it without a round trip.
// Where no watch is live (the provider is being replaced, or does not serve
// Watch) Snapshot collects instead, so a caller always gets a current
// snapshot or an error.
type Follower struct {
	env    Env
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	latest *Snapshot // nil while no watch is live
	last   *Snapshot // the last one delivered, live or not
}

// Follow starts following env until Close.
func Follow(env Env) *Follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{env: env, cancel: cancel, done: make(chan struct{})}
	go f.run(ctx)
	return f
}

// Follow starts following the provider until Close.
func (c *Client) Follow() *Follower { return Follow(c) }

// Retry pauses of the watch: short after a broken stream (a provider being
// replaced is back within milliseconds), long for a provider that does not
// serve Watch (it may be replaced by one that does).
const (
	watchRetryMin    = 20 * time.Millisecond
	watchRetryMax    = 2 * time.Second
	watchRetryUnimpl = 30 * time.Second
)

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	pause := watchRetryMin
	for ctx.Err() == nil {
		began := time.Now()
		got, err := f.watch(ctx)
		f.set(nil)
		if ctx.Err() != nil {
			return
		}
		switch {
		case errors.Is(err, sdk.ErrUnimplemented):
			pause = watchRetryUnimpl
		case got && time.Since(began) > watchRetryMax:
			// A watch that held for a while broke: the provider is
			// probably being replaced and back at once.
			pause = watchRetryMin
		default:
			pause = min(2*pause, watchRetryMax)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// watch follows one watch until it ends; got reports whether it
// delivered anything.
func (f *Follower) watch(ctx context.Context) (got bool, err error) {
	err = f.env.Watch(ctx, func(s Snapshot) error {
		got = true
		f.set(&s)
		return nil
	})
	return got, err
}

func (f *Follower) set(s *Snapshot) {
	f.mu.Lock()
	f.latest = s
	if s != nil {
		f.last = s
	}
	f.mu.Unlock()
}

// Snapshot returns the latest snapshot the watch delivered, or collects
// one when no watch is live. When the provider cannot be reached (it
// crashed and is restarting, or hangs) it returns the last snapshot it
// had, with Stale set: a command is better run with the last trusted
// facts than not at all. The maps of a watched snapshot are shared:
// callers must not change them.
func (f *Follower) Snapshot(ctx context.Context) (Snapshot, error) {
	f.mu.Lock()
	s, last := f.latest, f.last
	f.mu.Unlock()
	if s != nil {
		return *s, nil
	}
	snap, err := f.env.Collect(ctx)
	if err != nil && last != nil && ctx.Err() == nil && unreachable(err) {
		stale := *last
		stale.Stale = true
		return stale, nil
	}
	return snap, err
}

// unreachable reports whether err says the provider could not answer (as
// opposed to answering no).
func unreachable(err error) bool {
	return errors.Is(err, sdk.ErrProviderGone) || errors.Is(err, sdk.ErrNotProvided) || errors.Is(err, sdk.ErrDeadline)
}

// Close stops following and waits for the watch to end.
func (f *Follower) Close() {
	f.cancel()
	<-f.done
}
