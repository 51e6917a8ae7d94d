package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testplugins"
)

// lockedBuffer is a dsh's stderr, written while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveIn runs `dsh serve file` started in dir, as a user starts it from
// their project's folder, and connects an MCP client.
func serveIn(t *testing.T, ctx context.Context, dir, file string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", file)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	stderr := &lockedBuffer{}
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

// The sandbox composition, served from a project's folder as the README
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
