//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/kubetest"
	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/plugins/lib/kubeexec"
)

var binDir string

// TestMain builds the real binaries (this executor among them), runs the
// tests, and fails the run if any process of those binaries is left.
func TestMain(m *testing.M) {
	kubeexec.Quiet() // the test server's own client-go logging
	testplugins.Main(m, "dsh-kubeexec-", &binDir)
}

// composition is a session's composition: this executor on the test
// server's pod, and the bash tools.
func composition(s *kubetest.Server, pod string, extra string) string {
	return fmt.Sprintf(`plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-kubernetes
    config:
      kubeconfig: %s
      context: kubetest
      pod: %s
      graceMs: 1000
%s  - id: tools
    name: tool-bash
`, s.Kubeconfig, pod, extra)
}

type session struct {
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	file   string
	stderr *syncbuf.Buffer
}

func serve(t *testing.T, ctx context.Context, comp string) *session {
	t.Helper()
	s := &session{stderr: &syncbuf.Buffer{}, file: filepath.Join(t.TempDir(), "comp.yaml")}
	if err := os.WriteFile(s.file, []byte(comp), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(filepath.Join(binDir, "dsh"), "serve", s.file)
	s.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	s.cmd.Dir = t.TempDir()
	s.cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "kubeexec", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: s.cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", s.stderr)
		}
	})
	return s
}

// call calls a tool and returns its text and whether it is an error.
func (s *session) call(t *testing.T, ctx context.Context, tool string, args map[string]any) (string, bool) {
	t.Helper()
	if tool == "bash" {
		args["description"] = "kubernetes executor test"
	}
	r, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v\nstderr:\n%s", tool, args, err, s.stderr)
	}
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n"), r.IsError
}

func (s *session) bash(t *testing.T, ctx context.Context, command string) (string, bool) {
	t.Helper()
	return s.call(t, ctx, "bash", map[string]any{"command": command})
}

// startPod starts a kubetest server with one pod. As in a cluster, an
// exec whose client goes away leaves its processes running: ending a
// command's tree is this executor's work.
func startPod(t *testing.T, name string) *kubetest.Server {
	t.Helper()
	srv := kubetest.New(t)
	srv.KeepExecsOnDisconnect(true)
	if _, err := srv.AddPod(name, map[string]string{"app": name}); err != nil {
		t.Fatal(err)
	}
	return srv
}

func mcpCall(tool string, args map[string]any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: tool, Arguments: args}
}

// edit replaces the composition (written aside, then renamed over it)
// and waits until the host has reloaded it.
func (s *session) edit(t *testing.T, yaml string) {
	t.Helper()
	before := strings.Count(s.stderr.String(), "hot reload: ")
	tmp := s.file + ".next"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(tmp, future, future); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.file); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if log := s.stderr.String(); strings.Count(log, "hot reload: ") > before {
			last := log[strings.LastIndex(log, "hot reload: "):]
			line, _, _ := strings.Cut(last, "\n")
			t.Logf("%s", line)
			return
		}
	}
	t.Fatalf("dsh serve did not act on the edit\nstderr:\n%s", s.stderr)
}

// executorPid is this executor's pid in the host's last status table.
func (s *session) executorPid(t *testing.T) string {
	t.Helper()
	pid := ""
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[1] == "bash-kubernetes" {
			pid = f[3]
		}
	}
	if pid == "" {
		t.Fatalf("no status of bash-kubernetes:\n%s", s.stderr)
	}
	return pid
}
