//go:build linux

// Package pythonexecutor tests the Python executor through the real
// binaries: dsh serve of this folder's composition, over MCP.
package pythonexecutor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
)

var binDir string

func TestMain(m *testing.M) { testplugins.Main(m, "dsh-pyexec-", &binDir) }

type session struct {
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	stderr *syncbuf.Buffer
}

// build makes the one-file executor in a folder of its own, next to a
// copy of this folder's composition (which names it by path), and returns
// the composition's path. The build needs only Python's standard library.
func build(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	py, err := exec.LookPath("python3")
	if err != nil {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, filepath.Join(src, "build.py"), filepath.Join(dir, "dsh-python-executor")).CombinedOutput(); err != nil {
		t.Fatalf("build.py: %v\n%s", err, out)
	}
	comp, err := os.ReadFile("composition.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "composition.yaml")
	if err := os.WriteFile(path, comp, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func serve(t *testing.T, ctx context.Context, comp string) *session {
	t.Helper()
	s := &session{stderr: &syncbuf.Buffer{}}
	s.cmd = exec.Command(filepath.Join(binDir, "dsh"), "serve", comp)
	s.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	s.cmd.Dir = t.TempDir()
	s.cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pyexec", Version: "1"}, nil)
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
		args["description"] = "python executor test"
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

// provider is the pid of the Python executor the host runs: its child
// running dsh-python-executor.
func (s *session) provider(t *testing.T) int {
	t.Helper()
	host := strconv.Itoa(s.cmd.Process.Pid)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
			if !strings.Contains(string(cmdline), "dsh-python-executor") {
				continue
			}
			if stat, _ := os.ReadFile("/proc/" + d.Name() + "/stat"); ppidOf(stat) == host {
				return pid
			}
		}
	}
	t.Fatal("no Python executor runs under the host")
	return 0
}

// ppidOf is the parent pid field of a /proc/PID/stat line.
func ppidOf(stat []byte) string {
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		if f := strings.Fields(s[i+1:]); len(f) > 1 {
			return f[1]
		}
	}
	return ""
}

// gone reports whether pid has ended (a zombie has).
func gone(pid int) bool { return !testplugins.Alive(pid) }

var jobRE = regexp.MustCompile(`\bj[0-9]+\b`)

func TestPythonExecutor(t *testing.T) {
	testneeds.Python(t, "grpc", "google.protobuf", "cryptography")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := serve(t, ctx, build(t, "."))

	t.Run("foreground", func(t *testing.T) {
		got, isErr := s.call(t, ctx, "bash", map[string]any{"command": "echo hello; echo oops >&2"})
		if isErr || !strings.HasPrefix(got, "hello\n") || !strings.Contains(got, "oops") {
			t.Fatalf("got %q (isError %v), want hello and oops", got, isErr)
		}
	})

	t.Run("exit code", func(t *testing.T) {
		got, _ := s.call(t, ctx, "bash", map[string]any{"command": "echo before; exit 3"})
		if !strings.Contains(got, "before") || !strings.Contains(got, "[exit code: 3]") {
			t.Fatalf("got %q, want the output and [exit code: 3]", got)
		}
	})

	t.Run("timeout kills the tree", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "child")
		got, _ := s.call(t, ctx, "bash", map[string]any{
			"command":   "sleep 60 & echo $! > " + pidFile + "; echo started; sleep 60",
			"timeoutMs": 1000,
		})
		if !strings.Contains(got, "started") || !strings.Contains(got, "timed out after 1000ms") {
			t.Fatalf("got %q, want the output and the timeout", got)
		}
		raw, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); !gone(child); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				syscall.Kill(child, syscall.SIGKILL)
				t.Fatalf("the command's child %d still runs after the timeout", child)
			}
		}
	})

	t.Run("cancelled call ends the tree", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		cctx, ccancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := s.cs.CallTool(cctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
				"command": "echo $$ > " + pidFile + "; sleep 60", "description": "python executor test"}})
			done <- err
		}()
		var pid int
		for deadline := time.Now().Add(20 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
			if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			if time.Now().After(deadline) {
				ccancel()
				t.Fatal("the command did not start")
			}
		}
		ccancel()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("the cancelled call did not return")
		}
		for deadline := time.Now().Add(15 * time.Second); !gone(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("the command %d still runs after its call was cancelled", pid)
			}
		}
		got, isErr := s.call(t, ctx, "bash", map[string]any{"command": "echo after the cancel"})
		if isErr || got != "after the cancel" {
			t.Fatalf("got %q (isError %v), want the next command to run", got, isErr)
		}
	})

	t.Run("background job read and killed", func(t *testing.T) {
		started, isErr := s.call(t, ctx, "bash", map[string]any{
			"command":           "echo early; while :; do sleep 0.05; done",
			"run_in_background": true,
		})
		jid := jobRE.FindString(started)
		if isErr || jid == "" {
			t.Fatalf("start: %q (isError %v), want a job id", started, isErr)
		}
		var out string
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out, "early"); time.Sleep(50 * time.Millisecond) {
			more, _ := s.call(t, ctx, "job_output", map[string]any{"job_id": jid})
			if time.Now().After(deadline) {
				t.Fatalf("job_output: %q, want early", out)
			}
			out += more
		}
		killed, isErr := s.call(t, ctx, "job_kill", map[string]any{"job_id": jid})
		if isErr {
			t.Fatalf("job_kill: %q", killed)
		}
		var last string
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(last, "killed"); time.Sleep(50 * time.Millisecond) {
			last, _ = s.call(t, ctx, "job_output", map[string]any{"job_id": jid})
			if time.Now().After(deadline) {
				t.Fatalf("job_output after job_kill: %q (job_kill said %q), want it killed", last, killed)
			}
		}
		t.Logf("job_kill: %q; then job_output: %q", killed, last)
	})

	t.Run("kill -9 of the executor", func(t *testing.T) {
		pid := s.provider(t)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Reaped, not only dead: the host has seen the exit (as it has for
		// any call made after it).
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still there after SIGKILL", pid)
			}
		}
		got, isErr := s.call(t, ctx, "bash", map[string]any{"command": "echo after the restart"})
		if isErr || got != "after the restart" {
			t.Fatalf("got %q (isError %v), want the next command to run", got, isErr)
		}
		if again := s.provider(t); again == pid {
			t.Fatalf("the executor's pid is still %d", pid)
		}
	})
}
