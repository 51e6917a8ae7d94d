package registry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// churn is the shared state of TestChurn.
type churn struct {
	t *testing.T
	r *Registry

	inflight, maxInflight atomic.Int32 // disposers run by unloads

	mu        sync.Mutex
	counters  []*atomic.Int32 // runs of each registered effect
	withdraws []func()
	problems  []string

	// Observe checks: never concurrent, and each scope's transitions chain.
	observing atomic.Bool
	last      map[string]State
}

const (
	churnLevels  = 4 // a level-L scope provides kL and injects lower levels only: no cycles
	churnIDs     = 12
	churnWorkers = 8
	churnIters   = 300
)

func (c *churn) problem(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

func (c *churn) observe(ev Event) {
	if !c.observing.CompareAndSwap(false, true) {
		c.problem("Observe called concurrently")
		return
	}
	defer c.observing.Store(false)
	from, ok := c.last[ev.Scope]
	if !ok {
		from = Pending
	}
	if ev.From != from {
		c.problem("%s: event %s->%s after %s", ev.Scope, ev.From, ev.To, from)
	}
	if ev.To == Disposed {
		delete(c.last, ev.Scope)
	} else {
		c.last[ev.Scope] = ev.To
	}
}

// apply is the Apply of a level-L scope: it counts an effect that checks
// the dependents-first rule when disposed, then provides or replaces kL in
// various ways, or fails, or disposes someone.
func (c *churn) apply(level int, deps []Dep, seed uint64) func(context.Context, *Scope) error {
	var n atomic.Uint64
	return func(ctx context.Context, s *Scope) error {
		rng := rand.New(rand.NewPCG(seed, n.Add(1)))
		runs := new(atomic.Int32)
		if _, err := s.Effect("count", func(context.Context) error {
			if cur := c.inflight.Add(1); cur > c.maxInflight.Load() {
				c.maxInflight.Store(cur)
			}
			defer c.inflight.Add(-1)
			runs.Add(1)
			for _, d := range deps {
				if _, _, ok := c.r.Lookup(d.Key); !ok && !d.Optional {
					c.problem("%s disposed after its required %s vanished", s.ID(), d.Key)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		c.mu.Lock()
		c.counters = append(c.counters, runs)
		c.mu.Unlock()

		key := fmt.Sprintf("k%d", level)
		var dup *DuplicateProviderError
		switch rng.IntN(8) {
		case 0:
			return errors.New("churn failure")
		case 1:
			if _, err := s.Replace(key, s.ID(), dependents(rng.IntN(2) == 0)); err != nil {
				return err
			}
		case 2: // provide and take it back while still loading
			if w, err := s.Provide(key, s.ID()); err == nil {
				w()
			} else if !errors.As(err, &dup) {
				return err
			}
		case 3:
			if other, ok := c.r.Scope(fmt.Sprintf("s%d", rng.IntN(churnIDs))); ok && other != s {
				_ = other.Dispose(ctx)
			}
		case 4:
			runtime.Gosched()
			fallthrough
		default:
			if _, err := s.Provide(key, s.ID()); err != nil && !errors.As(err, &dup) {
				return err
			}
		}
		return nil
	}
}

func (c *churn) add(rng *rand.Rand) {
	level := rng.IntN(churnLevels)
	var deps []Dep
	for l := range level {
		if rng.IntN(2) == 0 {
			deps = append(deps, Dep{Key: fmt.Sprintf("k%d", l), Optional: rng.IntN(3) == 0})
		}
	}
	id := fmt.Sprintf("s%d", rng.IntN(churnIDs))
	_, err := c.r.Add(Spec{ID: id, Label: fmt.Sprintf("k%d", level), Inject: deps, Apply: c.apply(level, deps, rng.Uint64())})
	if err != nil && !strings.Contains(err.Error(), "already used") {
		c.problem("Add %s: %v", id, err)
	}
}

func (c *churn) step(rng *rand.Rand) {
	s, ok := c.r.Scope(fmt.Sprintf("s%d", rng.IntN(churnIDs)))
	op := rng.IntN(10)
	if !ok || op < 3 {
		c.add(rng)
		return
	}
	switch op {
	case 3:
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		if err := s.Dispose(ctx); err != nil {
			c.problem("Dispose %s: %v", s.ID(), err)
		}
	case 4:
		s.Restart()
	case 5:
		s.Bump()
	case 6, 7:
		key := s.Label() // its level's key: providing any other could make a cycle
		var w func()
		var err error
		if op == 6 {
			w, err = s.Provide(key, "outside")
		} else {
			w, err = s.Replace(key, "outside", dependents(rng.IntN(2) == 0))
		}
		if err == nil {
			c.mu.Lock()
			c.withdraws = append(c.withdraws, w)
			c.mu.Unlock()
		}
	case 8:
		c.mu.Lock()
		var w func()
		if n := len(c.withdraws); n > 0 {
			i := rng.IntN(n)
			w = c.withdraws[i]
			c.withdraws[i] = c.withdraws[n-1]
			c.withdraws = c.withdraws[:n-1]
		}
		c.mu.Unlock()
		if w != nil {
			w()
		}
	default:
		c.checkOwners()
	}
}

// checkOwners: no key has two visible owners, and Lookup agrees with the
// snapshot.
func (c *churn) checkOwners() {
	owners := map[string]string{}
	for _, i := range c.r.Snapshot() {
		for _, k := range i.Provides {
			if o, dup := owners[k]; dup {
				c.problem("key %s visible from %s and %s", k, o, i.ID)
			}
			owners[k] = i.ID
		}
	}
}

func TestChurn(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := &churn{t: t, last: map[string]State{}}
	c.r = New(Options{Observe: c.observe})

	var wg sync.WaitGroup
	for w := range churnWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range churnIters {
				c.step(rng)
			}
		}()
	}
	wg.Wait()
	settle(t, c.r)

	// At rest: one owner per key, every visible owner active, Lookup
	// agrees, and every pending scope is really missing something.
	c.checkOwners()
	for _, i := range c.r.Snapshot() {
		for _, k := range i.Provides {
			if _, owner, ok := c.r.Lookup(k); !ok || owner.ID() != i.ID {
				c.problem("Lookup(%s) disagrees with the snapshot of %s", k, i.ID)
			}
			if i.State != Active {
				c.problem("%s provides %s while %s", i.ID, k, i.State)
			}
		}
		if i.State == Pending && i.Reason == "" {
			c.problem("%s pending with nothing missing", i.ID)
		}
		if i.State == Loading || i.State == Unloading {
			c.problem("%s %s after Settled", i.ID, i.State)
		}
	}
	scopes := c.r.Snapshot()

	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := c.r.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, i := range scopes {
		if _, ok := c.r.Scope(i.ID); ok {
			c.problem("%s survived Close", i.ID)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, runs := range c.counters {
		if n := runs.Load(); n != 1 {
			c.problems = append(c.problems, fmt.Sprintf("effect %d disposed %d times", i, n))
		}
	}
	if m := c.maxInflight.Load(); m != 1 && len(c.counters) > 0 {
		c.problems = append(c.problems, fmt.Sprintf("%d disposers ran at once", m))
	}
	if len(c.last) != 0 {
		c.problems = append(c.problems, fmt.Sprintf("scopes never observed disposed: %v", c.last))
	}
	t.Logf("%d effects registered and disposed", len(c.counters))
	for _, p := range c.problems {
		t.Error(p)
	}
}
