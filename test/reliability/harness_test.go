// Package reliability is the fault suite: each test drives the real dsh
// binaries (dsh serve over MCP, the real plugins) through one fault a user
// will meet, then checks that the session still works. `make reliability`
// runs it and prints each fault with what happened; `make test` runs it too.
package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
)

var binDir string

func TestMain(m *testing.M) { testplugins.Main(m, "dsh-reliability-", &binDir) }

// The default tools composition: shell-env, bash-local, tool-bash.
const toolsComp = `
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`

// writeComp writes a composition file and returns its path.
func writeComp(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "comp.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// Fault records one injected fault for the report: its name, what was seen,
// and (once the test ends) whether the guarantee held.
type Fault struct {
	t    *testing.T
	name string
	mu   sync.Mutex
	seen []string
}

var report struct {
	mu    sync.Mutex
	lines []string
}

// fault starts the record of one fault. At the end of the test its line
// goes to the file named by $DSH_RELIABILITY_REPORT (make reliability
// prints it), and to the test log.
func fault(t *testing.T, name string) *Fault {
	f := &Fault{t: t, name: name}
	t.Cleanup(func() {
		verdict := "held  "
		if t.Failed() {
			verdict = "BROKEN"
		}
		f.mu.Lock()
		line := fmt.Sprintf("%s  %s: %s", verdict, f.name, strings.Join(f.seen, "; "))
		f.mu.Unlock()
		t.Log(line)
		if path := os.Getenv("DSH_RELIABILITY_REPORT"); path != "" {
			report.mu.Lock()
			defer report.mu.Unlock()
			if fh, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				fmt.Fprintln(fh, line)
				fh.Close()
			}
		}
	})
	return f
}

// Saw notes what happened, in a few words.
func (f *Fault) Saw(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, fmt.Sprintf(format, args...))
}

// serve is one `dsh serve` over stdio with a go-sdk client session.
type serve struct {
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	rtBase string // XDG_RUNTIME_DIR of the host
	file   string // the composition file it serves
	stderr *syncbuf.Buffer
	// links holds the titles of the resource links of the last tool call.
	links []string
	// listChanged counts the tools/list_changed notifications heard.
	listChanged atomic.Int32
}

// startServe starts `dsh serve [args...] COMPOSITION` and connects a client.
func startServe(t *testing.T, ctx context.Context, compYAML string, args ...string) *serve {
	t.Helper()
	return launch(t, ctx, t.TempDir(), nil, compYAML, args...)
}

// startServeIn is startServe with the host's runtime directory (and so its
// spill files) under rtBase, and extra variables in its environment.
func startServeIn(t *testing.T, ctx context.Context, rtBase, compYAML string, env ...string) *serve {
	t.Helper()
	return launch(t, ctx, rtBase, env, compYAML)
}

func launch(t *testing.T, ctx context.Context, rtBase string, env []string, compYAML string, args ...string) *serve {
	t.Helper()
	s := &serve{rtBase: rtBase, stderr: &syncbuf.Buffer{}}
	argv := append([]string{"serve"}, args...)
	s.file = writeComp(t, compYAML)
	argv = append(argv, s.file)
	s.cmd = exec.Command(filepath.Join(binDir, "dsh"), argv...)
	s.cmd.Env = append(append(os.Environ(), env...), "XDG_RUNTIME_DIR="+s.rtBase)
	s.cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "reliability", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.listChanged.Add(1) },
	})
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

// bash calls the bash tool and returns its text and whether it is an error.
func (s *serve) bash(t *testing.T, ctx context.Context, args map[string]any) (string, bool) {
	t.Helper()
	if _, ok := args["description"]; !ok {
		args["description"] = "reliability"
	}
	r, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: args})
	if err != nil {
		t.Fatalf("bash %v: %v\nstderr:\n%s", args, err, s.stderr)
	}
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n"), r.IsError
}

// commandsRun runs n commands in the session and fails the test unless each
// printed what it was asked to (after any job notices, which come first).
func (s *serve) commandsRun(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		want := fmt.Sprintf("ok %d", i)
		got, isErr := s.bash(t, ctx, map[string]any{"command": "echo ok " + fmt.Sprint(i)})
		if lines := strings.Split(got, "\n"); lines[len(lines)-1] != want || isErr {
			t.Fatalf("command %d: got %q (isError %v), want %q", i, got, isErr, want)
		}
	}
}

// call calls any tool and returns its text.
func (s *serve) call(ctx context.Context, tool string, args map[string]any) (string, error) {
	r, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n"), nil
}

var jobRE = regexp.MustCompile(`\bj[0-9]+\b`)

// jobID finds the job id in a background start's text.
func jobID(text string) string { return jobRE.FindString(text) }

// receive is one value from ch, or a failure naming what did not come once
// ctx (the test's own bound) ends: no wait of the suite is unbounded.
func receive[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("%s: nothing before the test's deadline (%v)", what, ctx.Err())
		panic("unreachable")
	}
}
