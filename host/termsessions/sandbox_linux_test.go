//go:build linux

package termsessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/terminals"
)

// watches is a sandbox's ledger of watches: each made by a start, each
// settled once, a kept one going on under a new name.
type watches struct {
	mu    sync.Mutex
	next  int
	open  map[string]bool
	calls []string // token:keep, in order
}

func (w *watches) make() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	tok := fmt.Sprintf("w%d", w.next)
	w.open[tok] = true
	return tok
}

func (w *watches) settle(_ context.Context, token string, keep bool) (string, []*sandbox.Undone, error) {
	w.mu.Lock()
	w.calls = append(w.calls, fmt.Sprintf("%s:%v", token, keep))
	if !w.open[token] {
		w.mu.Unlock()
		return "", nil, fmt.Errorf("watch %s settled twice", token)
	}
	delete(w.open, token)
	w.mu.Unlock()
	if !keep {
		return "", nil, nil
	}
	next := w.make()
	return next, []*sandbox.Undone{{Path: "/ws/.envrc", Why: "a protected path that did not exist"}}, nil
}

func (w *watches) state() ([]string, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var open []string
	for tok := range w.open {
		open = append(open, tok)
	}
	slices.Sort(open)
	return open, slices.Clone(w.calls)
}

// A confined session's watch is settled after each send and run (kept
// on), and for good when the session closes, its owner is released, an
// open fails after the start, or the host stops: none is left held.
func TestSandboxWatchSettled(t *testing.T) {
	w := &watches{open: map[string]bool{}}
	f := newFixture(t, func(c *Config) { c.SandboxSettle = w.settle })
	f.b.watch = w.make
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	in := f.open(t, "a", OpenRequest{})
	f.readToPrompt(t, "a", in.ID, "")
	if _, err := f.m.Settle(ctx, "a", in.ID, SendRequest{Text: "echo one", Submit: true, Wait: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Settle(ctx, "a", in.ID, SendRequest{Text: "echo __S__; echo two; echo __E__", Submit: true, Wait: 20 * time.Second, Capture: &Capture{From: "__S__", Until: "__E__"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.CloseSession(ctx, "a", in.ID); err != nil {
		t.Fatal(err)
	}
	open, calls := w.state()
	if want := []string{"w1:true", "w2:true", "w3:false"}; len(open) != 0 || !slices.Equal(calls, want) {
		t.Fatalf("open and close: watches held %v, settles %v (want %v)", open, calls, want)
	}

	// Released with its owner, and with the host.
	f.open(t, "b", OpenRequest{})
	if err := f.m.ReleaseOwner(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	f.open(t, "c", OpenRequest{})
	// An open that fails once the backend started the shell.
	f.b.afterSpawn = func() error { return f.m.ReleaseOwner(context.Background(), "d") }
	if _, err := f.m.Open(ctx, "d", OpenRequest{}); !errors.Is(err, terminals.ErrOwnerNotLive) {
		t.Fatalf("an open for an owner released meanwhile: %v", err)
	}
	f.b.afterSpawn = nil
	if err := f.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if open, calls := w.state(); len(open) != 0 {
		t.Fatalf("watches left held: %v (settles %v)", open, calls)
	}
}
