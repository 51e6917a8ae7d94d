package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// 4. Pending reasons list the sorted missing required keys; optional deps
// never block.
func TestPendingReason(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inject   []Dep
		provided []string
		state    State
		reason   string
	}{
		{"nothing provided", []Dep{{Key: "shell"}, {Key: "jobs"}}, nil, Pending, "waiting for: jobs, shell"},
		{"one of two", []Dep{{Key: "shell"}, {Key: "jobs"}}, []string{"jobs"}, Pending, "waiting for: shell"},
		{"duplicates", []Dep{{Key: "b"}, {Key: "a"}, {Key: "b"}}, nil, Pending, "waiting for: a, b"},
		{"optional missing", []Dep{{Key: "x", Optional: true}}, nil, Active, ""},
		{"optional missing, required missing", []Dep{{Key: "x", Optional: true}, {Key: "y"}}, nil, Pending, "waiting for: y"},
		{"all there", []Dep{{Key: "shell"}, {Key: "jobs"}}, []string{"jobs", "shell"}, Active, ""},
		{"no deps", nil, nil, Active, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReg(t, nil)
			mustAdd(t, r, Spec{ID: "provider", Apply: provide(nil, tc.provided...)})
			s := mustAdd(t, r, Spec{ID: "s", Inject: tc.inject})
			settle(t, r)
			if s.State() != tc.state || s.Reason() != tc.reason {
				t.Fatalf("%s %q, want %s %q", s.State(), s.Reason(), tc.state, tc.reason)
			}
			if i := info(t, r, "s"); i.Reason != tc.reason || i.State != tc.state {
				t.Fatalf("snapshot %+v", i)
			}
		})
	}
}

// 4. Independent scopes load in parallel.
func TestParallelLoad(t *testing.T) {
	r := newReg(t, nil)
	aIn, bIn := make(chan struct{}), make(chan struct{})
	apply := func(mine, other chan struct{}) func(context.Context, *Scope) error {
		return func(ctx context.Context, _ *Scope) error {
			close(mine)
			select { // both Applies must be running at once to get past this
			case <-other:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	a := mustAdd(t, r, Spec{ID: "a", Apply: apply(aIn, bIn)})
	b := mustAdd(t, r, Spec{ID: "b", Apply: apply(bIn, aIn)})
	settle(t, r)
	if a.State() != Active || b.State() != Active {
		t.Fatalf("a %s, b %s", a.State(), b.State())
	}
}

// 7. A failed Apply (error or panic) disposes its effects in reverse and
// leaves the scope Failed; nothing but Restart re-enters it.
func TestFailed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fail   func() error
		reason string
	}{
		{"error", func() error { return errors.New("boom") }, "boom"},
		{"panic", func() error { panic("kaboom") }, "apply panicked: kaboom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			r := newReg(t, rec)
			tr := &trace{}
			dep := mustAdd(t, r, Spec{ID: "dep", Apply: provide(nil, "k")})
			var applies atomic.Int32
			var healthy atomic.Bool
			s := mustAdd(t, r, Spec{ID: "s", Inject: []Dep{{Key: "k"}, {Key: "opt", Optional: true}}, Apply: func(_ context.Context, s *Scope) error {
				applies.Add(1)
				for _, l := range []string{"e1", "e2"} {
					if _, err := s.Effect(l, func(context.Context) error { tr.add("%s", l); return nil }); err != nil {
						return err
					}
				}
				if healthy.Load() {
					return nil
				}
				return tc.fail()
			}})
			settle(t, r)
			if s.State() != Failed || s.Reason() != tc.reason {
				t.Fatalf("%s %q, want failed %q", s.State(), s.Reason(), tc.reason)
			}
			equal(t, "disposal order", tr.take(), []string{"e2", "e1"})
			evs := rec.events()
			last := evs[len(evs)-1]
			if last.Scope != "s" || last.From != Unloading || last.To != Failed || last.Reason != tc.reason {
				t.Fatalf("last event %+v", last)
			}
			if len(info(t, r, "s").Effects) != 0 {
				t.Fatal("failed scope kept effects")
			}

			// Not re-entered: bump, an optional dep appearing, its required
			// dep going away.
			s.Bump()
			mustAdd(t, r, Spec{ID: "opt", Apply: provide(nil, "opt")})
			settle(t, r)
			if err := dep.Dispose(context.Background()); err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			if s.State() != Failed || applies.Load() != 1 {
				t.Fatalf("re-entered: %s after %d applies", s.State(), applies.Load())
			}

			// Restart: back to pending (k is gone), then loads when k is back.
			healthy.Store(true)
			s.Restart()
			settle(t, r)
			if s.State() != Pending || s.Reason() != "waiting for: k" {
				t.Fatalf("after restart %s %q", s.State(), s.Reason())
			}
			mustAdd(t, r, Spec{ID: "dep2", Apply: provide(nil, "k")})
			settle(t, r)
			if s.State() != Active || applies.Load() != 2 {
				t.Fatalf("after restart %s, %d applies", s.State(), applies.Load())
			}
		})
	}
}

// 8. A Bump while loading causes exactly one more Apply, with the new
// generation.
func TestBumpDuringApply(t *testing.T) {
	r := newReg(t, nil)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var gens []uint64
	var mu sync.Mutex
	s := mustAdd(t, r, Spec{ID: "s", Apply: func(_ context.Context, s *Scope) error {
		mu.Lock()
		gens = append(gens, info(t, r, "s").Generation)
		n := len(gens)
		mu.Unlock()
		if n == 1 {
			started <- struct{}{}
			<-release
		}
		return nil
	}})
	recv(t, started, "first apply")
	s.Bump()
	close(release)
	settle(t, r)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(gens, []uint64{0, 1}) || s.State() != Active {
		t.Fatalf("applied with generations %v, state %s", gens, s.State())
	}
}

// 8. A dependency that appears while loading is seen by a reload.
func TestDepAppearsDuringApply(t *testing.T) {
	r := newReg(t, nil)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var seen []bool
	var mu sync.Mutex
	mustAdd(t, r, Spec{ID: "s", Inject: []Dep{{Key: "k", Optional: true}}, Apply: func(_ context.Context, _ *Scope) error {
		_, _, ok := r.Lookup("k")
		mu.Lock()
		seen = append(seen, ok)
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			started <- struct{}{}
			<-release
		}
		return nil
	}})
	recv(t, started, "first apply")
	p := mustAdd(t, r, Spec{ID: "p", Apply: provide(nil, "k")})
	waitState(t, r, p, Active)
	close(release)
	settle(t, r)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []bool{false, true}) {
		t.Fatalf("applies saw k: %v", seen)
	}
}

// 8. An active scope whose epoch changes reloads: Bump, an optional dep
// appearing or going away.
func TestActiveScopeReloads(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, r *Registry, s *Scope)
		seen   bool // whether the reload sees k
	}{
		{"bump", func(_ *testing.T, _ *Registry, s *Scope) { s.Bump() }, false},
		{"optional dep appears", func(t *testing.T, r *Registry, _ *Scope) {
			mustAdd(t, r, Spec{ID: "p", Apply: provide(nil, "k")})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			r := newReg(t, rec)
			var seen []bool
			var mu sync.Mutex
			s := mustAdd(t, r, Spec{ID: "s", Inject: []Dep{{Key: "k", Optional: true}}, Apply: func(_ context.Context, _ *Scope) error {
				_, _, ok := r.Lookup("k")
				mu.Lock()
				seen = append(seen, ok)
				mu.Unlock()
				return nil
			}})
			settle(t, r)
			rec.take()
			tc.change(t, r, s)
			settle(t, r)
			var mine []string
			for _, e := range rec.take() {
				if strings.HasPrefix(e, "s:") {
					mine = append(mine, e)
				}
			}
			equal(t, "events", mine, []string{"s:active->unloading", "s:unloading->pending", "s:pending->loading", "s:loading->active"})
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, []bool{false, tc.seen}) {
				t.Fatalf("applies saw k: %v", seen)
			}
		})
	}
}

// 14. Scopes injecting each other's keys stay pending; Close disposes them.
func TestCycle(t *testing.T) {
	rec := &recorder{}
	r := New(Options{Observe: rec.observe})
	a := mustAdd(t, r, Spec{ID: "a", Inject: []Dep{{Key: "kb"}}, Apply: provide(nil, "ka")})
	b := mustAdd(t, r, Spec{ID: "b", Inject: []Dep{{Key: "ka"}}, Apply: provide(nil, "kb")})
	self := mustAdd(t, r, Spec{ID: "self", Inject: []Dep{{Key: "own"}}, Apply: provide(nil, "own")})
	settle(t, r)
	for s, want := range map[*Scope]string{a: "waiting for: kb", b: "waiting for: ka", self: "waiting for: own"} {
		if s.State() != Pending || s.Reason() != want {
			t.Errorf("%s: %s %q", s.ID(), s.State(), s.Reason())
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	equal(t, "events", rec.take(), []string{"self:pending->disposed", "b:pending->disposed", "a:pending->disposed"})
}

// A scope optionally injecting a key it provides itself loads once.
func TestOptionalSelfInject(t *testing.T) {
	r := newReg(t, nil)
	var applies atomic.Int32
	s := mustAdd(t, r, Spec{ID: "s", Inject: []Dep{{Key: "own", Optional: true}}, Apply: func(_ context.Context, s *Scope) error {
		applies.Add(1)
		_, err := s.Provide("own", 1)
		return err
	}})
	settle(t, r)
	if s.State() != Active || applies.Load() != 1 {
		t.Fatalf("%s after %d applies", s.State(), applies.Load())
	}
}
