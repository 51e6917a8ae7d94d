package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// 1. Provide is an effect labelled "service <key>", with an idempotent
// withdraw function.
func TestProvideIsEffect(t *testing.T) {
	r := newReg(t, nil)
	withdraw := make(chan func(), 1)
	mustAdd(t, r, Spec{ID: "a", Apply: func(_ context.Context, s *Scope) error {
		w, err := s.Provide("shell", 1)
		withdraw <- w
		if err != nil {
			return err
		}
		_, err = s.Effect("tool", nil)
		return err
	}})
	settle(t, r)
	i := info(t, r, "a")
	equal(t, "effects", i.Effects, []string{"service shell", "tool"})
	equal(t, "provides", i.Provides, []string{"shell"})

	w := recv(t, withdraw, "withdraw func")
	w()
	w()
	if _, _, ok := r.Lookup("shell"); ok {
		t.Fatal("shell still visible after withdraw")
	}
	i = info(t, r, "a")
	equal(t, "effects after withdraw", i.Effects, []string{"tool"})
	if len(i.Provides) != 0 || i.State != Active {
		t.Fatalf("after withdraw: %+v", i)
	}
}

// 1, 6. Provide and Effect are refused unless the scope is loading or active.
func TestAdmission(t *testing.T) {
	r := newReg(t, nil)
	pending := mustAdd(t, r, Spec{ID: "pending", Inject: []Dep{{Key: "nothing"}}})
	failed := mustAdd(t, r, Spec{ID: "failed", Apply: func(context.Context, *Scope) error { return errors.New("no") }})
	disposed := mustAdd(t, r, Spec{ID: "disposed"})
	settle(t, r)
	if err := disposed.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	unloading := make(chan [2]error, 1)
	u := mustAdd(t, r, Spec{ID: "unloading", Apply: func(_ context.Context, s *Scope) error {
		_, err := s.Effect("probe", func(context.Context) error {
			_, e1 := s.Effect("tool bash", nil)
			_, e2 := s.Provide("late", 1)
			unloading <- [2]error{e1, e2}
			return nil
		})
		return err
	}})
	settle(t, r)
	if err := u.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	late := recv(t, unloading, "disposer result")

	for _, tc := range []struct {
		name  string
		s     *Scope
		state State
		errs  func() (error, error)
	}{
		{"pending", pending, Pending, nil},
		{"failed", failed, Failed, nil},
		{"disposed", disposed, Disposed, nil},
		{"unloading", u, Unloading, func() (error, error) { return late[0], late[1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var effErr, provErr error
			if tc.errs != nil {
				effErr, provErr = tc.errs()
			} else {
				_, effErr = tc.s.Effect("tool bash", nil)
				_, provErr = tc.s.Provide("late", 1)
			}
			for _, err := range []error{effErr, provErr} {
				var ie *InactiveError
				if !errors.As(err, &ie) || !errors.Is(err, ErrInactive) {
					t.Fatalf("err = %v, want *InactiveError", err)
				}
				if ie.State != tc.state || ie.Scope != tc.s.Label() {
					t.Errorf("InactiveError = %+v, want state %s scope %s", ie, tc.state, tc.s.Label())
				}
			}
			if want := fmt.Sprintf(`scope "%s" is %s: cannot add effect "tool bash"`, tc.name, tc.state); effErr.Error() != want {
				t.Errorf("Effect error %q, want %q", effErr, want)
			}
			if !strings.Contains(provErr.Error(), `"service late"`) {
				t.Errorf("Provide error %q does not name the effect", provErr)
			}
		})
	}
}

// 2. One provider per key, visible or reserved; the key is free again once
// withdrawn.
func TestOneProviderPerKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reserved bool // the first provider is still loading
	}{
		{"visible", false},
		{"reserved by a loading scope", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReg(t, nil)
			release := make(chan struct{})
			provided := make(chan func(), 1)
			mustAdd(t, r, Spec{ID: "bash", Label: `"bash" (bin/dsh-bash-local)`, Apply: func(_ context.Context, s *Scope) error {
				w, err := s.Provide("shell", "bash")
				provided <- w
				if tc.reserved {
					<-release
				}
				return err
			}})
			withdraw := recv(t, provided, "first provide")
			if !tc.reserved {
				settle(t, r)
			}
			other := mustAdd(t, r, Spec{ID: "bash2", Label: `"bash2" (bin/other)`})
			waitState(t, r, other, Active)
			_, err := other.Provide("shell", "bash2")
			var dup *DuplicateProviderError
			if !errors.As(err, &dup) {
				t.Fatalf("second Provide: %v, want *DuplicateProviderError", err)
			}
			if dup.Key != "shell" || dup.Owner != `"bash2" (bin/other)` || dup.Existing != `"bash" (bin/dsh-bash-local)` {
				t.Fatalf("error fields %+v", dup)
			}
			for _, w := range []string{`"shell"`, `"bash" (bin/dsh-bash-local)`, `"bash2" (bin/other)`} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not mention %s", err, w)
				}
			}
			withdraw()
			if _, err := other.Provide("shell", "bash2"); err != nil {
				t.Fatalf("Provide after withdraw: %v", err)
			}
			if v, owner, ok := r.Lookup("shell"); !ok || v != "bash2" || owner != other {
				t.Fatalf("Lookup = %v %v %v", v, owner, ok)
			}
			close(release)
			settle(t, r)
		})
	}
}

// 3. Keys provided during Apply become visible when the scope turns
// active, never if it fails; from an active scope they are visible at once.
func TestVisibleOnlyOnceActive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    bool
		visible bool
	}{
		{"apply succeeds", false, true},
		{"apply fails", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReg(t, nil)
			provided, release := make(chan struct{}), make(chan struct{})
			mustAdd(t, r, Spec{ID: "p", Apply: func(_ context.Context, s *Scope) error {
				if _, err := s.Provide("k", "v"); err != nil {
					return err
				}
				close(provided)
				<-release
				if tc.fail {
					return errors.New("boom")
				}
				return nil
			}})
			d := mustAdd(t, r, Spec{ID: "d", Inject: []Dep{{Key: "k"}}})
			recv(t, provided, "provide")
			if _, _, ok := r.Lookup("k"); ok {
				t.Fatal("k visible while its provider is loading")
			}
			if got := info(t, r, "p").Provides; len(got) != 0 {
				t.Fatalf("Provides while loading = %v", got)
			}
			if d.State() != Pending || d.Reason() != "waiting for: k" {
				t.Fatalf("dependent %s %q", d.State(), d.Reason())
			}
			close(release)
			settle(t, r)
			_, _, ok := r.Lookup("k")
			if ok != tc.visible {
				t.Fatalf("visible = %v, want %v", ok, tc.visible)
			}
			if wantD := map[bool]State{true: Active, false: Pending}[tc.visible]; d.State() != wantD {
				t.Fatalf("dependent is %s, want %s", d.State(), wantD)
			}
		})
	}

	t.Run("provide from active scope", func(t *testing.T) {
		r := newReg(t, nil)
		s := mustAdd(t, r, Spec{ID: "s"})
		waitState(t, r, s, Active)
		if _, err := s.Provide("k", 7); err != nil {
			t.Fatal(err)
		}
		if v, owner, ok := r.Lookup("k"); !ok || v != 7 || owner != s {
			t.Fatalf("Lookup = %v %v %v", v, owner, ok)
		}
	})
}

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

// 5. When a service goes away its dependents are unloaded first
// (recursively), serially, while the service is still visible; required
// dependents go back to pending, optional ones reload without it.
func TestDependentsFirst(t *testing.T) {
	for _, how := range []string{"withdraw", "dispose", "restart"} {
		t.Run(how, func(t *testing.T) {
			r := newReg(t, nil)
			tr := &trace{}
			var inflight, maxInflight atomic.Int32
			effect := func(s *Scope, watch string) error {
				_, err := s.Effect("trace", func(context.Context) error {
					if n := inflight.Add(1); n > maxInflight.Load() {
						maxInflight.Store(n)
					}
					defer inflight.Add(-1)
					_, _, ok := r.Lookup(watch)
					tr.add("%s disposed (%s visible: %v)", s.ID(), watch, ok)
					return nil
				})
				return err
			}
			withdraw := make(chan func(), 1)
			p := mustAdd(t, r, Spec{ID: "p", Apply: func(_ context.Context, s *Scope) error {
				w, err := s.Provide("k", "v")
				if err != nil {
					return err
				}
				select {
				case withdraw <- w:
				default:
				}
				return effect(s, "k")
			}})
			req := mustAdd(t, r, Spec{ID: "req", Inject: []Dep{{Key: "k"}}, Apply: func(_ context.Context, s *Scope) error {
				if _, err := s.Provide("r", 1); err != nil {
					return err
				}
				return effect(s, "k")
			}})
			opt := mustAdd(t, r, Spec{ID: "opt", Inject: []Dep{{Key: "k", Optional: true}}, Apply: func(_ context.Context, s *Scope) error {
				_, _, ok := r.Lookup("k")
				tr.add("opt applied (k visible: %v)", ok)
				return effect(s, "k")
			}})
			deep := mustAdd(t, r, Spec{ID: "deep", Inject: []Dep{{Key: "r"}}, Apply: func(_ context.Context, s *Scope) error {
				return effect(s, "k")
			}})
			settle(t, r)
			tr.take()

			switch how {
			case "withdraw":
				recv(t, withdraw, "withdraw func")()
			case "dispose":
				if err := p.Dispose(context.Background()); err != nil {
					t.Fatal(err)
				}
			case "restart":
				p.Restart()
			}
			settle(t, r)
			want := []string{
				"opt disposed (k visible: true)",
				"deep disposed (k visible: true)",
				"req disposed (k visible: true)",
			}
			switch how {
			case "withdraw":
				want = append(want, "opt applied (k visible: false)")
			case "dispose":
				want = append(want, "p disposed (k visible: true)", "opt applied (k visible: false)")
			case "restart":
				// p comes back, and so do its dependents. opt does not wait
				// for its optional k, so it may load once more when k shows.
				want = append(want, "p disposed (k visible: true)")
			}
			got := tr.take()
			if how == "restart" {
				if n := len(got); n > 0 && got[n-1] == "opt applied (k visible: true)" {
					got = got[:len(want)]
				}
			}
			equal(t, "trace", got, want)
			if maxInflight.Load() != 1 {
				t.Errorf("%d disposers ran at once", maxInflight.Load())
			}
			if how == "restart" {
				for _, s := range []*Scope{p, req, opt, deep} {
					if s.State() != Active {
						t.Errorf("%s is %s after restart", s.ID(), s.State())
					}
				}
				return
			}
			if req.State() != Pending || req.Reason() != "waiting for: k" {
				t.Errorf("req %s %q", req.State(), req.Reason())
			}
			if deep.State() != Pending || deep.Reason() != "waiting for: r" {
				t.Errorf("deep %s %q", deep.State(), deep.Reason())
			}
			if opt.State() != Active {
				t.Errorf("opt %s", opt.State())
			}
		})
	}
}

// 5. Unloading a loading scope cancels its Apply and waits for it before
// disposing its effects.
func TestUnloadLoadingScope(t *testing.T) {
	for _, how := range []string{"dispose", "restart", "provider disposed"} {
		t.Run(how, func(t *testing.T) {
			r := newReg(t, nil)
			tr := &trace{}
			p := mustAdd(t, r, Spec{ID: "p", Apply: provide(nil, "k")})
			started := make(chan struct{}, 2)
			var applies atomic.Int32
			s := mustAdd(t, r, Spec{ID: "s", Inject: []Dep{{Key: "k"}}, Apply: func(ctx context.Context, s *Scope) error {
				if applies.Add(1) > 1 {
					return nil
				}
				if _, err := s.Effect("e", func(context.Context) error { tr.add("effect disposed"); return nil }); err != nil {
					return err
				}
				started <- struct{}{}
				<-ctx.Done()
				_, err := s.Effect("too late", nil)
				tr.add("apply returned (late effect refused: %v)", errors.Is(err, ErrInactive))
				return ctx.Err()
			}})
			recv(t, started, "apply")
			switch how {
			case "dispose":
				if err := s.Dispose(context.Background()); err != nil {
					t.Fatal(err)
				}
			case "restart":
				s.Restart()
			case "provider disposed":
				if err := p.Dispose(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			settle(t, r)
			equal(t, "trace", tr.take(), []string{"apply returned (late effect refused: true)", "effect disposed"})
			want := map[string]State{"dispose": Disposed, "restart": Active, "provider disposed": Pending}[how]
			if s.State() != want {
				t.Fatalf("state %s, want %s", s.State(), want)
			}
		})
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

// 9. Replace takes a key over, make before break.
func TestReplace(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keepDependents=%v", keep), func(t *testing.T) {
			r := newReg(t, nil)
			oldWithdraw := make(chan func(), 1)
			p := mustAdd(t, r, Spec{ID: "p", Apply: func(_ context.Context, s *Scope) error {
				w, err := s.Provide("k", "v1")
				oldWithdraw <- w
				return err
			}})
			var seen []any
			var mu sync.Mutex
			d := mustAdd(t, r, Spec{ID: "d", Inject: []Dep{{Key: "k"}}, Apply: func(_ context.Context, _ *Scope) error {
				v, _, _ := r.Lookup("k")
				mu.Lock()
				seen = append(seen, v)
				mu.Unlock()
				return nil
			}})
			x := mustAdd(t, r, Spec{ID: "x"})
			settle(t, r)

			if _, err := x.Replace("k", "v2", dependents(keep)); err != nil {
				t.Fatal(err)
			}
			if v, owner, ok := r.Lookup("k"); !ok || v != "v2" || owner != x {
				t.Fatalf("Lookup right after Replace = %v %v %v", v, owner, ok)
			}
			settle(t, r)
			if slices.Contains(info(t, r, "p").Effects, "service k") || !slices.Contains(info(t, r, "x").Effects, "service k") {
				t.Fatalf("effects p=%v x=%v", info(t, r, "p").Effects, info(t, r, "x").Effects)
			}
			recv(t, oldWithdraw, "old withdraw")() // inert now
			if v, _, ok := r.Lookup("k"); !ok || v != "v2" {
				t.Fatal("the old owner's withdraw removed the new provision")
			}
			settle(t, r)
			want := []any{"v1"}
			if !keep {
				want = append(want, "v2")
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, want) || d.State() != Active || p.State() != Active {
				t.Fatalf("dependent applies saw %v (want %v); d %s, p %s", seen, want, d.State(), p.State())
			}
		})
	}

	t.Run("from a loading scope", func(t *testing.T) {
		for _, fail := range []bool{false, true} {
			t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
				r := newReg(t, nil)
				p := mustAdd(t, r, Spec{ID: "p", Apply: provide(nil, "k")})
				var applies atomic.Int32
				mustAdd(t, r, Spec{ID: "d", Inject: []Dep{{Key: "k"}}, Apply: func(context.Context, *Scope) error {
					applies.Add(1)
					return nil
				}})
				settle(t, r)
				replaced, release := make(chan struct{}), make(chan struct{})
				x := mustAdd(t, r, Spec{ID: "x", Apply: func(_ context.Context, s *Scope) error {
					if _, err := s.Replace("k", "new", KeepDependents); err != nil {
						return err
					}
					close(replaced)
					<-release
					if fail {
						return errors.New("broken")
					}
					return nil
				}})
				recv(t, replaced, "replace")
				if v, owner, _ := r.Lookup("k"); v != "p:k" || owner != p {
					t.Fatalf("swapped before the replacer is active: %v %v", v, owner)
				}
				close(release)
				settle(t, r)
				wantV, wantOwner := any("new"), x
				if fail {
					wantV, wantOwner = "p:k", p
				}
				if v, owner, _ := r.Lookup("k"); v != wantV || owner != wantOwner {
					t.Fatalf("Lookup = %v %v, want %v %v", v, owner.ID(), wantV, wantOwner.ID())
				}
				if applies.Load() != 1 {
					t.Fatalf("dependent applied %d times", applies.Load())
				}
			})
		}
	})

	t.Run("nobody owns the key", func(t *testing.T) {
		r := newReg(t, nil)
		x := mustAdd(t, r, Spec{ID: "x"})
		settle(t, r)
		w, err := x.Replace("k", 1, ReloadDependents)
		if err != nil {
			t.Fatal(err)
		}
		if v, _, ok := r.Lookup("k"); !ok || v != 1 {
			t.Fatal("not provided")
		}
		w()
		if _, _, ok := r.Lookup("k"); ok {
			t.Fatal("withdraw did not withdraw")
		}
	})
}

// 10. Dispose is idempotent, works from any state, removes the scope and
// joins every disposer's error.
func TestDispose(t *testing.T) {
	t.Run("errors joined, panics recovered, all run", func(t *testing.T) {
		r := newReg(t, nil)
		tr := &trace{}
		errOne := errors.New("one failed")
		s := mustAdd(t, r, Spec{ID: "s", Apply: func(_ context.Context, s *Scope) error {
			_, _ = s.Effect("one", func(context.Context) error { tr.add("one"); return errOne })
			_, _ = s.Effect("two", func(context.Context) error { tr.add("two"); panic("two panicked") })
			_, _ = s.Effect("three", func(context.Context) error { tr.add("three"); return nil })
			return nil
		}})
		settle(t, r)
		err := s.Dispose(context.Background())
		equal(t, "disposers", tr.take(), []string{"three", "two", "one"})
		if !errors.Is(err, errOne) || !strings.Contains(err.Error(), "two panicked") || !strings.Contains(err.Error(), `"one"`) {
			t.Fatalf("Dispose error %v", err)
		}
		if err := s.Dispose(context.Background()); err != nil {
			t.Fatalf("second Dispose: %v", err)
		}
		if len(tr.take()) != 0 {
			t.Fatal("disposers ran twice")
		}
	})

	for _, tc := range []struct {
		name  string
		spec  Spec
		state State
	}{
		{"pending", Spec{ID: "s", Inject: []Dep{{Key: "missing"}}}, Pending},
		{"failed", Spec{ID: "s", Apply: func(context.Context, *Scope) error { return errors.New("x") }}, Failed},
		{"active", Spec{ID: "s"}, Active},
	} {
		t.Run("from "+tc.name, func(t *testing.T) {
			rec := &recorder{}
			r := newReg(t, rec)
			s := mustAdd(t, r, tc.spec)
			settle(t, r)
			if s.State() != tc.state {
				t.Fatalf("state %s, want %s", s.State(), tc.state)
			}
			rec.take()
			var wg sync.WaitGroup
			for range 3 { // concurrent calls share the disposal
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := s.Dispose(context.Background()); err != nil {
						t.Errorf("Dispose: %v", err)
					}
				}()
			}
			wg.Wait()
			recv(t, s.Done(), "Done")
			if s.State() != Disposed {
				t.Fatalf("state %s", s.State())
			}
			if _, ok := r.Scope("s"); ok || len(r.Snapshot()) != 0 {
				t.Fatal("disposed scope still in the registry")
			}
			want := []string{"s:" + tc.state.String() + "->disposed"}
			if tc.state == Active {
				want = []string{"s:active->unloading", "s:unloading->disposed"}
			}
			equal(t, "events", rec.take(), want)
			again := mustAdd(t, r, Spec{ID: "s"}) // the id is free again
			settle(t, r)
			if again.State() != Active {
				t.Fatalf("re-added scope is %s", again.State())
			}
		})
	}
}

// Disposers may dispose other scopes or close the registry through their
// ctx, and Apply may dispose through its ctx, without deadlock.
func TestReentrantDispose(t *testing.T) {
	t.Run("from a disposer", func(t *testing.T) {
		r := newReg(t, nil)
		other := mustAdd(t, r, Spec{ID: "other"})
		s := mustAdd(t, r, Spec{ID: "s", Apply: func(_ context.Context, s *Scope) error {
			_, err := s.Effect("dispose other", func(ctx context.Context) error { return other.Dispose(ctx) })
			return err
		}})
		settle(t, r)
		if err := s.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
		recv(t, other.Done(), "other disposed")
	})
	t.Run("close from a disposer", func(t *testing.T) {
		r := newReg(t, nil)
		s := mustAdd(t, r, Spec{ID: "s", Apply: func(_ context.Context, s *Scope) error {
			_, err := s.Effect("close", func(ctx context.Context) error { return r.Close(ctx) })
			return err
		}})
		other := mustAdd(t, r, Spec{ID: "other"})
		settle(t, r)
		if err := s.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
		recv(t, other.Done(), "other disposed by close")
		if _, err := r.Add(Spec{ID: "late"}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Add after close: %v", err)
		}
	})
	t.Run("withdraw from its own scope's disposer", func(t *testing.T) {
		r := newReg(t, nil)
		d := mustAdd(t, r, Spec{ID: "d", Inject: []Dep{{Key: "k"}}})
		s := mustAdd(t, r, Spec{ID: "s", Apply: func(_ context.Context, s *Scope) error {
			_, err := s.Effect("first", func(context.Context) error {
				if _, _, ok := r.Lookup("k"); ok {
					return errors.New("k outlived its later registration")
				}
				return nil
			})
			if err != nil {
				return err
			}
			w, err := s.Provide("k", 1)
			if err != nil {
				return err
			}
			_, err = s.Effect("withdraw", func(context.Context) error { w(); return nil })
			return err
		}})
		settle(t, r)
		if d.State() != Active {
			t.Fatalf("d %s", d.State())
		}
		if err := s.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d.State() != Pending {
			t.Fatalf("d %s", d.State())
		}
	})
	t.Run("apply disposes itself", func(t *testing.T) {
		r := newReg(t, nil)
		s := mustAdd(t, r, Spec{ID: "s", Apply: func(ctx context.Context, s *Scope) error {
			return s.Dispose(ctx) // returns when the unload cancels ctx
		}})
		recv(t, s.Done(), "self-disposal")
		settle(t, r)
	})
}

// 11. Close disposes everything, dependents first, serially, even pending
// scopes; afterwards Add fails and Changed still works.
func TestClose(t *testing.T) {
	rec := &recorder{}
	r := New(Options{Observe: rec.observe})
	tr := &trace{}
	var inflight, maxInflight atomic.Int32
	eff := func(s *Scope, name string) {
		_, _ = s.Effect(name, func(ctx context.Context) error {
			if n := inflight.Add(1); n > maxInflight.Load() {
				maxInflight.Store(n)
			}
			defer inflight.Add(-1)
			tr.add("%s/%s (ctx err: %v)", s.ID(), name, ctx.Err())
			return nil
		})
	}
	both := func(keys ...string) func(context.Context, *Scope) error {
		return func(_ context.Context, s *Scope) error {
			eff(s, "1")
			for _, k := range keys {
				if _, err := s.Provide(k, 1); err != nil {
					return err
				}
			}
			eff(s, "2")
			return nil
		}
	}
	// Added providers last, so that add order alone would get it wrong.
	mustAdd(t, r, Spec{ID: "a", Inject: []Dep{{Key: "b"}}, Apply: both()})
	mustAdd(t, r, Spec{ID: "c", Inject: []Dep{{Key: "b", Optional: true}}, Apply: both()})
	mustAdd(t, r, Spec{ID: "stuck", Inject: []Dep{{Key: "never"}}})
	mustAdd(t, r, Spec{ID: "b", Inject: []Dep{{Key: "base"}}, Apply: both("b")})
	mustAdd(t, r, Spec{ID: "base", Apply: both("base")})
	settle(t, r)
	rec.take()
	tr.take() // c may have reloaded once b showed up

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // an expired ctx does not stop Close from calling every disposer
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lines := tr.take()
	pos := map[string]int{}
	for i, l := range lines {
		pos[strings.Fields(l)[0]] = i
		if !strings.HasSuffix(l, "(ctx err: context canceled)") {
			t.Errorf("disposer did not get Close's ctx: %s", l)
		}
	}
	if len(lines) != 8 {
		t.Fatalf("disposers run: %q", lines)
	}
	for _, pair := range [][2]string{{"a", "b"}, {"c", "b"}, {"b", "base"}} {
		if pos[pair[0]+"/1"] > pos[pair[1]+"/2"] {
			t.Errorf("%s disposed after %s began: %q", pair[0], pair[1], lines)
		}
	}
	if maxInflight.Load() != 1 {
		t.Errorf("%d disposers ran at once", maxInflight.Load())
	}
	disposed := 0
	for _, e := range rec.take() {
		if strings.HasSuffix(e, "->disposed") {
			disposed++
		}
		if strings.HasSuffix(e, "->loading") {
			t.Errorf("scope loaded during close: %s", e)
		}
	}
	if disposed != 5 || len(r.Snapshot()) != 0 {
		t.Fatalf("%d scopes disposed, %d left", disposed, len(r.Snapshot()))
	}
	if _, err := r.Add(Spec{ID: "late"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
	select {
	case <-r.Changed():
		t.Fatal("Changed fired with nothing changing")
	default:
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	settle(t, r)
}

// 11. Close cancels loading scopes and joins disposer errors.
func TestCloseWhileLoading(t *testing.T) {
	r := New(Options{})
	started := make(chan struct{})
	boom := errors.New("boom")
	mustAdd(t, r, Spec{ID: "s", Apply: func(ctx context.Context, s *Scope) error {
		_, _ = s.Effect("e", func(context.Context) error { return boom })
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}})
	recv(t, started, "apply")
	if err := r.Close(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want boom", err)
	}
	if err := r.Close(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("second Close = %v, want the same result", err)
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

// An effect's own disposer runs it once, at once, and takes it out of the
// scope.
func TestEffectDisposer(t *testing.T) {
	r := newReg(t, nil)
	var runs atomic.Int32
	release := make(chan func(), 1)
	s := mustAdd(t, r, Spec{ID: "s", Apply: func(_ context.Context, s *Scope) error {
		f, err := s.Effect("e", func(context.Context) error { runs.Add(1); return nil })
		release <- f
		return err
	}})
	settle(t, r)
	f := recv(t, release, "disposer")
	f()
	f()
	if runs.Load() != 1 || len(info(t, r, "s").Effects) != 0 {
		t.Fatalf("runs %d, effects %v", runs.Load(), info(t, r, "s").Effects)
	}
	if err := s.Dispose(context.Background()); err != nil || runs.Load() != 1 {
		t.Fatalf("dispose: %v, runs %d", err, runs.Load())
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

func dependents(keep bool) Dependents {
	if keep {
		return KeepDependents
	}
	return ReloadDependents
}
