package composition

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func loadSandbox(t *testing.T, dir, yaml string, env map[string]string) (*Composition, error) {
	t.Helper()
	file := filepath.Join(dir, "comp.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(file, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func TestSandboxSection(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ws", "cache", "home"} {
		_ = os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	_ = os.Symlink(filepath.Join(dir, "ws"), filepath.Join(dir, "link"))
	env := map[string]string{"HOME": filepath.Join(dir, "home"), "WS": "ws"}

	c, err := loadSandbox(t, dir, "plugins: []\n", env)
	if err != nil || c.Sandbox != nil {
		t.Fatalf("no section: %+v %v", c.Sandbox, err)
	}

	// No workspace named: the folder dsh was started in, not the
	// composition's.
	start := filepath.Join(dir, "start")
	_ = os.Mkdir(start, 0o755)
	t.Chdir(start)
	c, err = loadSandbox(t, dir, "sandbox: {}\nplugins: []\n", env)
	if err != nil {
		t.Fatal(err)
	}
	sb := c.Sandbox
	if sb.DefaultMode != ModeWorkspaceWrite || sb.WorkspaceRoot != start || sb.Network || sb.Runner != RunnerAuto {
		t.Fatalf("defaults: %+v", sb)
	}
	for _, want := range []string{filepath.Join(start, ".git/config"), filepath.Join(start, ".git/hooks"), filepath.Join(start, ".claude"), filepath.Join(start, ".codex"),
		filepath.Join(start, ".envrc"), filepath.Join(start, ".vscode"), filepath.Join(start, ".idea"), c.File} {
		if !slices.Contains(sb.ProtectedPaths, want) {
			t.Errorf("protected paths %v lack %s", sb.ProtectedPaths, want)
		}
	}
	if slices.Contains(sb.ProtectedPaths, filepath.Join(start, ".git/index")) {
		t.Error(".git/index is protected: commits would fail")
	}

	c, err = loadSandbox(t, dir, `sandbox:
  defaultMode: read-only
  workspaceRoot: ${WS}
  writableRoots: [cache, link]
  protectedPaths: [ws/secrets]
  unixSockets: [run/agent.sock]
  runner: bubblewrap
plugins: []
`, env)
	if err != nil {
		t.Fatal(err)
	}
	sb = c.Sandbox
	ws := filepath.Join(dir, "ws")
	if sb.DefaultMode != ModeReadOnly || sb.WorkspaceRoot != ws || !slices.Equal(sb.WritableRoots, []string{filepath.Join(dir, "cache"), ws}) {
		t.Fatalf("section: %+v", sb)
	}
	if !slices.Contains(sb.ProtectedPaths, filepath.Join(ws, "secrets")) || !slices.Contains(sb.ProtectedPaths, filepath.Join(dir, "cache", ".git/hooks")) {
		t.Fatalf("protected: %v", sb.ProtectedPaths)
	}
	if !slices.Equal(sb.UnixSockets, []string{filepath.Join(dir, "run/agent.sock")}) || sb.Runner != RunnerBubblewrap {
		t.Fatalf("unix sockets: %v", sb.UnixSockets)
	}
	// dsh config prints the policy as resolved.
	if m, ok := c.Masked()["sandbox"].(map[string]any); !ok || m["workspaceRoot"] != ws || m["defaultMode"] != ModeReadOnly {
		t.Fatalf("masked: %v", c.Masked()["sandbox"])
	}
	c, err = loadSandbox(t, dir, "sandbox: {defaultMode: danger-full-access}\nplugins: []\n", env)
	if err != nil || !c.Sandbox.Network {
		t.Fatalf("danger-full-access leaves the network on: %+v %v", c.Sandbox, err)
	}
	c, err = loadSandbox(t, dir, "sandbox: {network: true}\nplugins: []\n", env)
	if err != nil || !c.Sandbox.Network {
		t.Fatalf("network on: %+v %v", c.Sandbox, err)
	}

	for _, bad := range []struct{ yaml, want string }{
		{"sandbox:\n  workspaceRoot: /\nplugins: []\n", `comp.yaml:2:18: sandbox.workspaceRoot: / cannot be a writable root`},
		{"sandbox:\n  workspaceRoot: home\nplugins: []\n", "cannot be a writable root"},
		{"sandbox:\n  writableRoots: [" + filepath.Join(dir, "home") + "]\nplugins: []\n", "sandbox.writableRoots: " + filepath.Join(dir, "home") + " cannot be a writable root"},
		{"sandbox:\n  workspaceRoot: nowhere\nplugins: []\n", "sandbox.workspaceRoot: " + filepath.Join(dir, "nowhere") + " does not exist"},
		{"sandbox:\n  workspaceRoot: comp.yaml\nplugins: []\n", "is not a directory"},
		{"sandbox:\n  runner: docker\nplugins: []\n", `comp.yaml:2:11: sandbox.runner: want one of auto, landlock, bubblewrap, got the string "docker"`},
		{"sandbox:\n  defaultMode: strict\nplugins: []\n", `comp.yaml:2:16: sandbox.defaultMode: want one of read-only, workspace-write, danger-full-access, got the string "strict"`},
		{"sandbox:\n  network: maybe\nplugins: []\n", "sandbox.network must be true, false or a map"},
		{"sandbox:\n  roots: [a]\nplugins: []\n", `unknown sandbox key "roots"`},
		{"sandbox: on\nplugins: []\n", "sandbox must be a map"},
	} {
		_, err := loadSandbox(t, dir, bad.yaml, env)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}

	// Started in the home folder with no workspace named: refused, saying
	// where the workspace came from.
	t.Chdir(env["HOME"])
	_, err = loadSandbox(t, dir, "sandbox:\n  defaultMode: workspace-write\nplugins: []\n", env)
	if err == nil || !strings.Contains(err.Error(), "comp.yaml:1") || !strings.Contains(err.Error(), "sandbox.workspaceRoot: "+env["HOME"]+" cannot be a writable root") ||
		!strings.Contains(err.Error(), "the workspace is the folder dsh was started in: start dsh in a project folder, or name one") {
		t.Errorf("started in HOME: %v", err)
	}
}

func TestApprovalSection(t *testing.T) {
	dir := t.TempDir()
	c, err := loadSandbox(t, dir, `approval:
  rules:
    - {match: "npm install*", mode: workspace-write, decision: allow}
    - {match: "rm *", decision: deny}
  otherwise: deny
plugins: []
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Approval
	if a.Otherwise != "deny" || len(a.Rules) != 2 || a.Rules[0].Match != "npm install*" || a.Rules[0].Mode != ModeWorkspaceWrite || a.Rules[1].Decision != "deny" || a.Rules[1].Pos.Line != 4 {
		t.Fatalf("section: %+v", a)
	}
	if c, err := loadSandbox(t, dir, "approval: {}\nplugins: []\n", nil); err != nil || c.Approval.Otherwise != "ask" {
		t.Fatalf("defaults: %+v %v", c.Approval, err)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"approval:\n  rules:\n    - {match: ls, decision: maybe}\nplugins: []\n", `comp.yaml:3:29: approval.rules entry 1: decision must be one of allow, deny, ask`},
		{"approval:\n  rules:\n    - {match: ls, mode: strict, decision: allow}\nplugins: []\n", "mode must be one of read-only"},
		{"approval:\n  rules:\n    - {decision: allow}\nplugins: []\n", "needs match and decision"},
		{"approval:\n  rules:\n    - {match: ls, decision: allow, who: me}\nplugins: []\n", `unknown key "who"`},
		{"approval:\n  otherwise: allow\nplugins: []\n", "approval.otherwise: want deny or ask"},
		{"approval:\n  rules: ls\nplugins: []\n", "approval.rules must be a list"},
	} {
		if _, err := loadSandbox(t, dir, bad.yaml, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}
}
