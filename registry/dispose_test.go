package registry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

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
