package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestStateString(t *testing.T) {
	for _, tc := range []struct {
		s    State
		want string
	}{
		{Pending, "pending"}, {Loading, "loading"}, {Active, "active"},
		{Failed, "failed"}, {Unloading, "unloading"}, {Disposed, "disposed"},
		{State(42), "State(42)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("State(%d).String() = %q, want %q", int(tc.s), got, tc.want)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	dup := &DuplicateProviderError{Key: "shell", Owner: `"bash2" (bin/b2)`, Existing: `"bash" (bin/dsh-bash-local)`}
	if got, want := dup.Error(), `service "shell" is already provided by "bash" (bin/dsh-bash-local); "bash2" (bin/b2) cannot provide it`; got != want {
		t.Errorf("DuplicateProviderError = %q, want %q", got, want)
	}
	var err error = &InactiveError{Scope: `"x"`, State: Unloading, What: "tool bash"}
	if got, want := err.Error(), `scope "x" is unloading: cannot add effect "tool bash"`; got != want {
		t.Errorf("InactiveError = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInactive) {
		t.Error("InactiveError does not match ErrInactive")
	}
	if errors.Is(dup, ErrInactive) {
		t.Error("DuplicateProviderError matches ErrInactive")
	}
}

func TestAdd(t *testing.T) {
	r := newReg(t, nil)
	mustAdd(t, r, Spec{ID: "env", Label: `"env" (bin/a)`})
	for _, tc := range []struct {
		name string
		spec Spec
		want []string // substrings of the error
	}{
		{"empty id", Spec{Label: "nameless"}, []string{"empty id", "nameless"}},
		{"duplicate id", Spec{ID: "env", Label: `"env" (bin/b)`}, []string{`"env"`, `(bin/a)`, `(bin/b)`}},
		{"empty inject key", Spec{ID: "x", Inject: []Dep{{Key: ""}}}, []string{"empty key", `"x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Add(tc.spec)
			if err == nil {
				t.Fatal("Add succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	s := mustAdd(t, r, Spec{ID: "plain"})
	if s.Label() != `"plain"` || s.ID() != "plain" {
		t.Errorf("id/label = %q/%q", s.ID(), s.Label())
	}
	if got, ok := r.Scope("plain"); !ok || got != s {
		t.Error("Scope(plain) not found")
	}
}

// 12. Every transition is observed, in order.
func TestEvents(t *testing.T) {
	rec := &recorder{}
	r := newReg(t, rec)
	a := mustAdd(t, r, Spec{ID: "a", Apply: provide(nil, "k")})
	mustAdd(t, r, Spec{ID: "b", Inject: []Dep{{Key: "k"}}})
	settle(t, r)
	equal(t, "load", rec.take(), []string{"a:pending->loading", "a:loading->active", "b:pending->loading", "b:loading->active"})
	if err := a.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	equal(t, "dispose", rec.take(), []string{"b:active->unloading", "b:unloading->pending", "a:active->unloading", "a:unloading->disposed"})
	evs := rec.events()
	if ev := evs[len(evs)-3]; ev.Reason != "waiting for: k" {
		t.Fatalf("pending event %+v", ev)
	}
}

// Disposer errors of implicit reloads reach the observer.
func TestReloadErrorsObserved(t *testing.T) {
	rec := &recorder{}
	r := newReg(t, rec)
	s := mustAdd(t, r, Spec{ID: "s", Apply: func(_ context.Context, s *Scope) error {
		_, err := s.Effect("e", func(context.Context) error { return errors.New("leaky") })
		return err
	}})
	settle(t, r)
	s.Bump()
	settle(t, r)
	for _, ev := range rec.events() {
		if ev.From == Unloading && ev.To == Pending {
			if !strings.Contains(ev.Reason, "dispose:") || !strings.Contains(ev.Reason, "leaky") {
				t.Fatalf("reason %q", ev.Reason)
			}
			return
		}
	}
	t.Fatal("no reload observed")
}

// Changed is closed on every change and replaced.
func TestChanged(t *testing.T) {
	r := newReg(t, nil)
	ch := r.Changed()
	select {
	case <-ch:
		t.Fatal("closed before any change")
	default:
	}
	s := mustAdd(t, r, Spec{ID: "s"})
	recv(t, ch, "change on Add")
	settle(t, r)
	ch = r.Changed()
	if _, err := s.Provide("k", 1); err != nil {
		t.Fatal(err)
	}
	recv(t, ch, "change on Provide")
}

// Settled gives up with ctx.
func TestSettledContext(t *testing.T) {
	r := newReg(t, nil)
	started := make(chan struct{})
	mustAdd(t, r, Spec{ID: "slow", Apply: func(ctx context.Context, _ *Scope) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}})
	recv(t, started, "apply")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Settled(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Settled = %v", err)
	}
}

// Snapshot is sorted by id and reports everything about a scope.
func TestSnapshot(t *testing.T) {
	r := newReg(t, nil)
	mustAdd(t, r, Spec{ID: "zeta", Label: "Z", Apply: provide(nil, "y", "x")})
	mustAdd(t, r, Spec{ID: "alpha", Inject: []Dep{{Key: "x"}, {Key: "w", Optional: true}}})
	settle(t, r)
	s, _ := r.Scope("zeta")
	s.Bump()
	settle(t, r)
	got := r.Snapshot()
	if len(got) != 2 || got[0].ID != "alpha" || got[1].ID != "zeta" {
		t.Fatalf("order %+v", got)
	}
	z := got[1]
	if z.Label != "Z" || z.State != Active || z.Generation != 1 ||
		!slices.Equal(z.Provides, []string{"x", "y"}) || !slices.Equal(z.Effects, []string{"service y", "service x"}) {
		t.Fatalf("zeta %+v", z)
	}
	if a := got[0]; len(a.Inject) != 2 || !a.Inject[1].Optional || a.State != Active || a.Label != `"alpha"` {
		t.Fatalf("alpha %+v", a)
	}
}

// BenchmarkChain loads a chain of scopes, each injecting its predecessor's
// key, then closes it (dependents first).
func BenchmarkChain(b *testing.B) {
	const n = 50
	for b.Loop() {
		r := New(Options{})
		for i := range n {
			spec := Spec{ID: fmt.Sprintf("s%d", i), Apply: func(_ context.Context, s *Scope) error {
				_, err := s.Provide(fmt.Sprintf("k%d", i), i)
				return err
			}}
			if i > 0 {
				spec.Inject = []Dep{{Key: fmt.Sprintf("k%d", i-1)}}
			}
			if _, err := r.Add(spec); err != nil {
				b.Fatal(err)
			}
		}
		if err := r.Settled(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := r.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup measures the read path front ends and the hub use.
func BenchmarkLookup(b *testing.B) {
	r := New(Options{})
	defer r.Close(context.Background())
	s, _ := r.Add(Spec{ID: "s"})
	_ = r.Settled(context.Background())
	if _, err := s.Provide("k", 1); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, ok := r.Lookup("k"); !ok {
			b.Fatal("not found")
		}
	}
}
