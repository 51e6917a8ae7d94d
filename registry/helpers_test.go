package registry

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guard bounds every wait; tests never sleep to synchronise.
const guard = 10 * time.Second

// newReg returns a registry closed when the test ends.
func newReg(t *testing.T, rec *recorder) *Registry {
	t.Helper()
	var opts Options
	if rec != nil {
		opts.Observe = rec.observe
	}
	r := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		_ = r.Close(ctx)
	})
	return r
}

func mustAdd(t *testing.T, r *Registry, spec Spec) *Scope {
	t.Helper()
	s, err := r.Add(spec)
	if err != nil {
		t.Fatalf("add %q: %v", spec.ID, err)
	}
	return s
}

func settle(t *testing.T, r *Registry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := r.Settled(ctx); err != nil {
		t.Fatalf("registry did not settle: %v\n%s", err, dump(r))
	}
}

// waitFor waits, through Changed, until cond holds.
func waitFor(t *testing.T, r *Registry, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(guard)
	for {
		ch := r.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timeout waiting for %s\n%s", what, dump(r))
		}
	}
}

func waitState(t *testing.T, r *Registry, s *Scope, want State) {
	t.Helper()
	waitFor(t, r, s.ID()+" "+want.String(), func() bool { return s.State() == want })
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("timeout waiting for %s", what)
		panic("unreachable")
	}
}

func dump(r *Registry) string {
	var b strings.Builder
	for _, i := range r.Snapshot() {
		fmt.Fprintf(&b, "  %s %s %q provides=%v effects=%v gen=%d\n", i.ID, i.State, i.Reason, i.Provides, i.Effects, i.Generation)
	}
	return b.String()
}

func info(t *testing.T, r *Registry, id string) ScopeInfo {
	t.Helper()
	for _, i := range r.Snapshot() {
		if i.ID == id {
			return i
		}
	}
	t.Fatalf("no scope %q in snapshot", id)
	return ScopeInfo{}
}

// recorder records events as "id:from->to".
type recorder struct {
	mu  sync.Mutex
	evs []string
	all []Event
}

func (rec *recorder) observe(ev Event) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.evs = append(rec.evs, fmt.Sprintf("%s:%s->%s", ev.Scope, ev.From, ev.To))
	rec.all = append(rec.all, ev)
}

// take returns the events recorded since the last take.
func (rec *recorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.evs
	rec.evs = nil
	return out
}

func (rec *recorder) events() []Event {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Event(nil), rec.all...)
}

// trace is an ordered log written by Applies and disposers.
type trace struct {
	mu    sync.Mutex
	lines []string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

func (tr *trace) take() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := tr.lines
	tr.lines = nil
	return out
}

// provide returns an Apply that provides each key (value: "<id>:<key>")
// and registers an effect that traces its disposal.
func provide(tr *trace, keys ...string) func(context.Context, *Scope) error {
	return func(_ context.Context, s *Scope) error {
		for _, k := range keys {
			if _, err := s.Provide(k, s.ID()+":"+k); err != nil {
				return err
			}
		}
		if tr != nil {
			_, err := s.Effect("trace", func(context.Context) error {
				tr.add("%s disposed", s.ID())
				return nil
			})
			return err
		}
		return nil
	}
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}
