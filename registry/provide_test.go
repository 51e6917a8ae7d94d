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

func dependents(keep bool) Dependents {
	if keep {
		return KeepDependents
	}
	return ReloadDependents
}
