package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
)

// serveIn runs `dsh serve file` started in dir, as a user starts it from
// their project's folder, with env over the test's environment, and
// connects an MCP client.
func serveIn(t *testing.T, ctx context.Context, dir, file string, env ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", file)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir()), env...)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", stderr)
		}
	})
	return cs
}

// bashDescription is the description of the bash tool cs lists.
func bashDescription(t *testing.T, ctx context.Context, cs *mcp.ClientSession) string {
	t.Helper()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "bash" {
			return tl.Description
		}
	}
	t.Fatal("no bash tool listed")
	return ""
}

// The sandbox composition, served from a project's folder as docs/sandbox.md
// shows: that folder is the workspace, commands start in it and may write
// there and not outside, and the bash tool's description names it.
func TestSandboxComposition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	project, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := outsideTmp(t)
	cs := serveIn(t, ctx, project, filepath.Join(testplugins.Root(), "compositions", "sandbox.yaml"))

	desc := bashDescription(t, ctx, cs)
	for _, want := range []string{"starts in `" + project + "`", "write only in the workspace, `" + project + "`"} {
		if !strings.Contains(desc, want) {
			t.Errorf("the bash description lacks %q:\n%s", want, desc)
		}
	}
	r := callBash(t, ctx, cs, map[string]any{"command": "echo $DSH_COMPOSITION; pwd; touch ./x && echo made"})
	if got := text(t, r); got != "sandbox\n"+project+"\nmade" || r.IsError {
		t.Fatalf("in the workspace: %q (isError %v)", got, r.IsError)
	}
	if _, err := os.Stat(filepath.Join(project, "x")); err != nil {
		t.Fatalf("./x was not made in the folder dsh was started in: %v", err)
	}
	r = callBash(t, ctx, cs, map[string]any{"command": "touch " + outside + "/y"})
	if got := text(t, r); !strings.Contains(got, "[sandbox: file access denied under workspace-write mode]") || !r.IsError {
		t.Fatalf("outside the workspace: %q (isError %v)", got, r.IsError)
	}
	if _, err := os.Stat(filepath.Join(outside, "y")); err == nil {
		t.Fatal("a write outside the workspace went through")
	}
}

// A composition that names its workspace: commands start there, not in
// the folder dsh was started in, and the description says so.
func TestSandboxNamedWorkspace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, start := filepath.Join(dir, "ws"), filepath.Join(dir, "start")
	for _, d := range []string{ws, start} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(dir, "comp.yaml")
	if err := os.WriteFile(f, []byte(`
sandbox:
  workspaceRoot: ws
plugins:
  - {id: env, name: shell-env}
  - {id: bash, name: bash-sandbox}
  - {id: tools, name: tool-bash}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cs := serveIn(t, ctx, start, f)
	if desc := bashDescription(t, ctx, cs); !strings.Contains(desc, "starts in `"+ws+"`") || !strings.Contains(desc, "the workspace, `"+ws+"`") {
		t.Errorf("the bash description does not name the workspace %s:\n%s", ws, desc)
	}
	r := callBash(t, ctx, cs, map[string]any{"command": "pwd; touch ./x && echo made"})
	if got := text(t, r); got != ws+"\nmade" || r.IsError {
		t.Fatalf("a command started elsewhere than the workspace: %q (isError %v)", got, r.IsError)
	}
}

// The hooks composition with DSH_PROJECT, started in another folder:
// commands start in the project, and its hooks are told that folder, the
// one the command runs in.
func TestHooksCompositionProject(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project, start, home := filepath.Join(dir, "project"), filepath.Join(dir, "start"), filepath.Join(dir, "home")
	for _, d := range []string{filepath.Join(project, ".claude"), start, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	payload := filepath.Join(dir, "payload.json")
	settings, _ := json.Marshal(map[string]any{"hooks": map[string]any{"PreToolUse": []any{
		map[string]any{"matcher": "Bash", "hooks": []any{map[string]any{"type": "command", "command": "cat > " + payload}}},
	}}})
	if err := os.WriteFile(filepath.Join(project, ".claude", "settings.json"), settings, 0o644); err != nil {
		t.Fatal(err)
	}
	// HOME is the test's own: the user's ~/.claude hooks are not this test's.
	cs := serveIn(t, ctx, start, filepath.Join(testplugins.Root(), "compositions", "hooks.yaml"), "DSH_PROJECT="+project, "HOME="+home)
	r := callBash(t, ctx, cs, map[string]any{"command": "pwd -P"})
	if got := text(t, r); got != project || r.IsError {
		t.Fatalf("commands start in %q (isError %v), want the project %s", got, r.IsError, project)
	}
	b, err := os.ReadFile(payload)
	var p struct {
		Cwd string `json:"cwd"`
	}
	if err != nil || json.Unmarshal(b, &p) != nil || p.Cwd != project {
		t.Fatalf("the hook was told %q (%v), want the folder the command ran in, %s", b, err, project)
	}
}
