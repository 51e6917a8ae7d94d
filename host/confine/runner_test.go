//go:build linux

package confine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/internal/testneeds"
)

// ctx.sandbox picks the runner the composition asked for, makes one
// confinement ready per policy, and refuses what it cannot confine with
// ErrUnavailable, never an argv that would run unconfined.
func TestRunnerWrap(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	pol := &sandbox.Policy{WorkspaceRoot: ws}
	req := func(mode string, p *sandbox.Policy) *sandbox.WrapRequest {
		return &sandbox.WrapRequest{Argv: []string{"bash", "-c", "true"}, Mode: mode, Policy: p}
	}
	r := NewRunner("auto", Options{})
	defer r.Close()
	w, err := r.Wrap(ctx, req(sandbox.WorkspaceWrite, pol))
	if err != nil {
		t.Skipf("no landlock runner here: %v", err)
	}
	if w.Runner != sandbox.RunnerLandlock || w.Confinement == "" || strings.Join(w.Argv, " ") != "bash -c true" {
		t.Fatalf("auto: %+v", w)
	}
	again, err := r.Wrap(ctx, req(sandbox.WorkspaceWrite, pol))
	if err != nil || again.Confinement != w.Confinement {
		t.Fatalf("the same policy is the same confinement: %v %v", again, err)
	}
	if confine, err := r.Confinement(w.Confinement); err != nil || confine == nil {
		t.Fatalf("the confinement is held: %v", err)
	}
	if _, err := r.Confinement("c0000"); err == nil {
		t.Fatal("an unknown confinement was found")
	}
	ro, err := r.Wrap(ctx, req(sandbox.ReadOnly, pol))
	if err != nil || ro.Confinement == w.Confinement {
		t.Fatalf("another mode is another confinement: %v %v", ro, err)
	}
	// Only what may write has something to settle; a settle names a watch
	// the host holds.
	if w.Settle == "" || ro.Settle != "" {
		t.Fatalf("settle: workspace-write %q, read-only %q", w.Settle, ro.Settle)
	}
	if st, err := r.Settle(ctx, &sandbox.SettleRequest{Settle: w.Settle}); err != nil || len(st.Undone) != 0 || st.Settle != "" {
		t.Fatalf("settle of a command that made nothing: %v %v", st, err)
	}
	// A command that goes on keeps its watch under a new name.
	kept, err := r.Wrap(ctx, req(sandbox.WorkspaceWrite, pol))
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Settle(ctx, &sandbox.SettleRequest{Settle: kept.Settle, Keep: true})
	if err != nil || st.Settle == "" || !strings.HasPrefix(st.Settle, strings.SplitN(kept.Settle, ".", 2)[0]+".") {
		t.Fatalf("a kept watch: %v %v", st, err)
	}
	if _, err := r.Settle(ctx, &sandbox.SettleRequest{Settle: st.Settle}); err != nil {
		t.Fatalf("the kept watch's settle: %v", err)
	}
	if _, err := r.Settle(ctx, &sandbox.SettleRequest{Settle: "g0.1"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("an unknown watch: %v", err)
	}
	for _, bad := range []*sandbox.WrapRequest{
		req(sandbox.DangerFullAccess, pol),
		req("strict", pol),
		req(sandbox.WorkspaceWrite, &sandbox.Policy{}),
		req(sandbox.WorkspaceWrite, &sandbox.Policy{WorkspaceRoot: "rel"}),
		{Mode: sandbox.ReadOnly, Policy: pol},
	} {
		if w, err := r.Wrap(ctx, bad); !errors.Is(err, sandbox.ErrUnavailable) {
			t.Errorf("%+v: %+v %v", bad, w, err)
		}
	}
	// Unix sockets by name: auto keeps landlock, which says it covers the
	// host's other sockets; bubblewrap chosen leaves its filter off.
	withSockets := &sandbox.Policy{WorkspaceRoot: ws, UnixSockets: []string{ws + "/agent.sock"}}
	w, err = r.Wrap(ctx, req(sandbox.WorkspaceWrite, withSockets))
	if err != nil || w.Runner != sandbox.RunnerLandlock || w.Confinement == "" || !strings.Contains(w.Enforcement, "unix-socket-covers") {
		t.Fatalf("auto with unix sockets: %+v %v", w, err)
	}
	testneeds.Command(t, "bwrap")
	bw := NewRunner(sandbox.RunnerBubblewrap, Options{})
	defer bw.Close()
	w, err = bw.Wrap(ctx, req(sandbox.WorkspaceWrite, withSockets))
	if err != nil || w.Runner != sandbox.RunnerBubblewrap || w.Confinement != "" || w.Argv[0] == "bash" {
		t.Fatalf("bubblewrap with unix sockets: %+v %v", w, err)
	}
	r.SetChoice("bubblewrap")
	if w, err = r.Wrap(ctx, req(sandbox.ReadOnly, pol)); err != nil || w.Runner != sandbox.RunnerBubblewrap {
		t.Fatalf("bubblewrap chosen: %+v %v", w, err)
	}
	// Without named sockets, bubblewrap is spawned under the filter that
	// refuses them all.
	if confine, err := r.Confinement(w.Confinement); err != nil || confine == nil || w.Enforcement != "bubblewrap,seccomp" {
		t.Fatalf("bubblewrap's socket filter: %+v %v", w, err)
	}
}
