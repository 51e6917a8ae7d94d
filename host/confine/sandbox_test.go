package confine

import (
	"context"
	"slices"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/composition"
)

// The section's cache roots are served as cache roots, not writable ones
// (the runner's guard watches only those), and an edit of them alone is a
// new policy.
func TestPolicyCacheRoots(t *testing.T) {
	section := &composition.Sandbox{DefaultMode: composition.ModeWorkspaceWrite, WorkspaceRoot: "/w",
		WritableRoots: []string{"/lib"}, CacheRoots: []string{"/home/u/.npm"}}
	s := New(section)
	p, err := s.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.WritableRoots, []string{"/lib"}) || !slices.Equal(p.CacheRoots, []string{"/home/u/.npm"}) {
		t.Fatalf("served writable roots %v, cache roots %v", p.WritableRoots, p.CacheRoots)
	}
	if w := sandbox.ForMode(p, sandbox.WorkspaceWrite); !slices.Equal(w.CacheRoots, p.CacheRoots) || !slices.Equal(w.WritableRoots, p.WritableRoots) {
		t.Errorf("workspace-write: writable %v, cache %v", w.WritableRoots, w.CacheRoots)
	}
	if r := sandbox.ForMode(p, sandbox.ReadOnly); len(r.CacheRoots) != 0 || len(r.WritableRoots) != 0 || r.WorkspaceRoot != "" {
		t.Errorf("read-only got roots: %v", r)
	}
	same := *section
	if s.Set(&same) {
		t.Error("the same section counted as a change")
	}
	edited := *section
	edited.CacheRoots = []string{"/home/u/.npm", "/home/u/.cache/pip"}
	if !s.Set(&edited) {
		t.Error("a cache root added did not count as a change")
	}
}
