package composition

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sandbox.cacheRoots: none by default; ~ is HOME; a missing one is made;
// what is odd (relative, /, HOME, a protected path or what holds one,
// the workspace or a writable root, in one or around one) is refused at
// its line.
func TestSandboxCacheRoots(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	for _, d := range []string{"ws", "home", "home/.npm", "elsewhere", "ws/node_modules", "more"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink's target is what counts.
	if err := os.Symlink(filepath.Join(dir, "ws", "node_modules"), filepath.Join(dir, "inws")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "more", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home}
	c, err := loadSandbox(t, dir, "sandbox: {workspaceRoot: ws}\nplugins: []\n", env)
	if err != nil || len(c.Sandbox.CacheRoots) != 0 {
		t.Fatalf("by default: %v %v", c.Sandbox.CacheRoots, err)
	}
	c, err = loadSandbox(t, dir, "sandbox:\n  workspaceRoot: ws\n  cacheRoots: [~/.npm, ~/.cache/go-build, "+filepath.Join(dir, "elsewhere")+"]\nplugins: []\n", env)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(home, ".npm"), filepath.Join(home, ".cache/go-build"), filepath.Join(dir, "elsewhere")}
	if !slices.Equal(c.Sandbox.CacheRoots, want) {
		t.Fatalf("cache roots: %v, want %v", c.Sandbox.CacheRoots, want)
	}
	if fi, err := os.Stat(filepath.Join(home, ".cache/go-build")); err != nil || !fi.IsDir() {
		t.Fatalf("a missing cache root was not made: %v", err)
	}
	if slices.Contains(c.Sandbox.ProtectedPaths, filepath.Join(home, ".npm", ".git/config")) {
		t.Fatal("a cache root got a project's protected paths")
	}
	if m, ok := c.Masked()["sandbox"].(map[string]any); !ok || !slices.Equal(m["cacheRoots"].([]string), want) {
		t.Fatalf("masked: %v", c.Masked()["sandbox"])
	}
	for _, bad := range []struct{ yaml, want string }{
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots:\n    - ~/.npm\n    - .cache\n", "comp.yaml:5:7: sandbox.cacheRoots: .cache is a relative path"},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: [/]\n", "comp.yaml:3:16: sandbox.cacheRoots: / cannot be a cache root"},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: ['~']\n", "sandbox.cacheRoots: " + home + " cannot be a cache root"},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: [" + filepath.Join(dir, "ws", ".git", "hooks") + "]\n", "comp.yaml:3:16: sandbox.cacheRoots: " + filepath.Join(dir, "ws", ".git", "hooks") + " cannot be a cache root: the protected path"},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: [" + dir + "]\n", "cannot be a cache root: the protected path"},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: [" + filepath.Join(dir, "comp.yaml") + "]\n", "comp.yaml:3:16: sandbox.cacheRoots: " + filepath.Join(dir, "comp.yaml") + " cannot be made"},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: [" + filepath.Join(dir, "ws", "node_modules") + "]\n", "comp.yaml:3:16: sandbox.cacheRoots: " + filepath.Join(dir, "ws", "node_modules") + " cannot be a cache root: it overlaps the workspace root " + filepath.Join(dir, "ws")},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: [" + filepath.Join(dir, "ws", "target") + "]\n", "sandbox.cacheRoots: " + filepath.Join(dir, "ws", "target") + " cannot be a cache root: it overlaps the workspace root"},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: [" + filepath.Join(dir, "inws") + "]\n", "sandbox.cacheRoots: " + filepath.Join(dir, "ws", "node_modules") + " cannot be a cache root: it overlaps the workspace root"},
		{"sandbox:\n  workspaceRoot: ws\n  writableRoots: [more]\n  cacheRoots: [" + filepath.Join(dir, "more", "cache") + "]\n", "comp.yaml:4:16: sandbox.cacheRoots: " + filepath.Join(dir, "more", "cache") + " cannot be a cache root: it overlaps the writable root " + filepath.Join(dir, "more")},
		{"sandbox:\n  workspaceRoot: ws\n  writableRoots: [more/sub]\n  cacheRoots: [" + filepath.Join(dir, "more") + "]\n", "cannot be a cache root: the protected path " + filepath.Join(dir, "more", "sub", ".git", "config")},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: ~/.npm\n", "sandbox.cacheRoots must be a list of paths"},
		{"sandbox:\n  workspaceRoot: ws\n  cacheRoots: [3]\n", "sandbox.cacheRoots: want a path"},
	} {
		_, err := loadSandbox(t, dir, bad.yaml+"plugins: []\n", env)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}
	if _, err := loadSandbox(t, dir, "sandbox:\n  cacheRoots: [~/.npm]\nplugins: []\n", nil); err == nil || !strings.Contains(err.Error(), "HOME is not set") {
		t.Errorf("~ without HOME: %v", err)
	}
}
