package confine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/composition"
)

// Under both runners, a cache root of the composition is writable, and
// what a package manager keeps there stays whole: a bare repository a
// command makes in it keeps its config (as the Go module cache's
// vcs/<hash> must), and the guard neither walks nor watches it, while
// the workspace's guard still undoes a repository planted there. Outside
// the workspace and the cache root nothing is writable.
func TestCacheRootsUnguarded(t *testing.T) {
	for _, choice := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(choice, func(t *testing.T) {
			r := runnerFor(t, choice)
			m := newManager(t)
			g := newGitWorld(t)
			base, err := filepath.EvalSymlinks(t.TempDir())
			must(t, err)
			cache, beside := filepath.Join(base, "cache"), filepath.Join(base, "beside")
			must(t, os.MkdirAll(filepath.Join(cache, "pkg", "mod", "cache"), 0o755))
			must(t, os.Mkdir(beside, 0o755))
			// The policy as the host serves it from the composition's
			// section, per call as the sandboxing executor asks for it.
			served := PolicyOf(&composition.Sandbox{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: g.ws,
				CacheRoots: []string{cache}, ProtectedPaths: g.policy.ProtectedPaths})
			p := sandbox.ForMode(served, sandbox.WorkspaceWrite)
			vcs := filepath.Join(cache, "pkg", "mod", "cache", "vcs", "0123abcd")
			script := `set -e
git init -q --bare ` + vcs + `
git -C ` + vcs + ` config remote.origin.url https://example.invalid/m.git
echo cached > ` + cache + `/written
git init -q planted
if echo x > ` + beside + `/nope 2>/dev/null; then echo "wrote beside"; fi
echo done`
			res, undone := wrappedRun(t, r, m, p, g.ws, script)
			if res.ExitCode != 0 || string(res.Stdout.Data) != "done\n" {
				t.Fatalf("the command failed:\n%s", output(res))
			}
			var paths []string
			for _, u := range undone {
				paths = append(paths, u.Path)
			}
			if slices.ContainsFunc(paths, func(p string) bool { return within(cache, p) }) {
				t.Errorf("undid what the command made in the cache root: %v", paths)
			}
			if !slices.ContainsFunc(paths, func(p string) bool { return within(filepath.Join(g.ws, "planted"), p) }) {
				t.Errorf("the repository planted in the workspace was not undone: %v", paths)
			}
			if b, err := os.ReadFile(filepath.Join(vcs, "config")); err != nil || !strings.Contains(string(b), "example.invalid") {
				t.Errorf("the bare repository in the cache root lost its config: %v %q", err, b)
			}
			if b, err := os.ReadFile(filepath.Join(cache, "written")); err != nil || string(b) != "cached\n" {
				t.Errorf("a write in the cache root: %v %q", err, b)
			}
			if _, err := os.Stat(filepath.Join(beside, "nope")); err == nil {
				t.Error("a folder beside the cache root was writable")
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.guards) != 1 {
				t.Fatalf("%d guards, want the workspace's", len(r.guards))
			}
			for _, gd := range r.guards {
				gd.mu.Lock()
				var watched []string
				for _, d := range gd.dirs {
					watched = append(watched, d)
				}
				gd.mu.Unlock()
				if !slices.Contains(watched, filepath.Join(g.ws, "nested")) {
					t.Errorf("the workspace is not watched (watching %d folders)", len(watched))
				}
				if i := slices.IndexFunc(watched, func(d string) bool { return within(cache, d) }); i >= 0 {
					t.Errorf("the guard watches %s, in the cache root", watched[i])
				}
				if slices.ContainsFunc(gd.roots, func(root string) bool { return within(cache, root) }) {
					t.Errorf("the guard walks the cache root: roots %v", gd.roots)
				}
			}
		})
	}
}

// A per-call policy whose cache root is, holds or is inside a writable
// root is refused: the guard, which leaves cache roots alone, would miss
// part of that root.
func TestCacheRootOverlapRefused(t *testing.T) {
	r := NewRunner("", Options{})
	t.Cleanup(func() { r.Close() })
	wrap := func(p *sandbox.Policy) error {
		_, err := r.Wrap(t.Context(), &sandbox.WrapRequest{Argv: []string{"true"}, Mode: sandbox.WorkspaceWrite, Policy: p})
		return err
	}
	for _, c := range []struct{ cache, writable string }{
		{"/w/node_modules", ""}, {"/w", ""}, {"/c", "/c/proj"}, {"/c/x", "/c"},
	} {
		p := &sandbox.Policy{WorkspaceRoot: "/w", CacheRoots: []string{c.cache}}
		if c.writable != "" {
			p.WritableRoots = []string{c.writable}
		}
		if err := wrap(p); err == nil || !strings.Contains(err.Error(), "the cache root "+c.cache+" overlaps the writable root") {
			t.Errorf("cache root %s beside %v: %v", c.cache, p.WritableRoots, err)
		}
	}
	ws, cache := t.TempDir(), t.TempDir()
	if err := wrap(&sandbox.Policy{WorkspaceRoot: ws, CacheRoots: []string{cache}}); err != nil {
		t.Errorf("a cache root beside the workspace: %v", err)
	}
}
