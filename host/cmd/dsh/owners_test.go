package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
)

// resumableComp: owners wait for their client, and a second bearer token
// names the principal "ci".
const resumableComp = `
clients:
  owners: resumable
  resumeWithin: 2m
  tokens:
    - name: ci
      token: ${DSH_TEST_CI_TOKEN}
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`

const ciToken = "cccccccccccccccccccccccccccccccccccccccc"

var jobHandleRe = regexp.MustCompile(`\bj-[0-9a-f]{32}\b`)

// Through the real binaries: the go-sdk client at its latest protocol
// speaks the stateless one over HTTP, its job ids are handles of its
// token's principal, and the composition's second token is another
// principal; a client with a session gets a resume handle and comes back
// to its job, and after a host restart the handle names nothing and the
// job is gone.
func TestOwnersThroughServe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f := comp(t, resumableComp)
	env := []string{"DSH_TEST_CI_TOKEN=" + ciToken}
	url, token, cmd := serveHTTPComp(t, f, env, "--release-grace", "300ms")

	// Stateless: no session, a handle for an id.
	s1 := connectHTTPAt(t, ctx, url, token, "", "")
	defer s1.Close()
	if v := s1.InitializeResult().ProtocolVersion; v != "2026-07-28" || s1.ID() != "" {
		t.Fatalf("the go-sdk client's latest over HTTP: protocol %q, session %q", v, s1.ID())
	}
	started := text(t, callBash(t, ctx, s1, map[string]any{"command": "echo stateless-ran", "run_in_background": true}))
	job := jobHandleRe.FindString(started)
	if job == "" {
		t.Fatalf("background start %q: want a handle", started)
	}
	s2 := connectHTTPAt(t, ctx, url, token, "", "")
	defer s2.Close()
	ci := connectHTTPAt(t, ctx, url, ciToken, "", "")
	defer ci.Close()
	if r := jobOutput(t, ctx, ci, job); !r.IsError || !strings.Contains(text(t, r), "no such job") {
		t.Fatalf("the ci principal read the job: %q", text(t, r))
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(text(t, jobOutput(t, ctx, s2, job)), "stateless-ran") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the principal's other client never read the job's output")
		}
	}

	// A session with a resume handle, which survives a reconnect.
	a := connectHTTPAt(t, ctx, url, token, "2025-11-25", "")
	handle, _ := a.InitializeResult().Meta["dev.dsh/resume"].(string)
	if len(handle) != 32 {
		t.Fatalf("initialize _meta %v: want a resume handle", a.InitializeResult().Meta)
	}
	marker := "sleep 3" + strings.Repeat("1", 4) + ".5"
	id := structuredJobID(t, callBash(t, ctx, a, map[string]any{"command": marker, "run_in_background": true}))
	_ = a.Close()
	time.Sleep(time.Second) // past the release grace: a resumable owner waits resumeWithin
	back := connectHTTPAt(t, ctx, url, token, "2025-11-25", handle)
	if r, _ := back.InitializeResult().Meta["dev.dsh/resumed"].(bool); !r {
		t.Fatalf("came back with the handle: %v", back.InitializeResult().Meta)
	}
	if r := jobOutput(t, ctx, back, id); r.IsError || len(testplugins.Matching(marker)) == 0 {
		t.Fatalf("the job after coming back: %q", text(t, r))
	}
	_ = back.Close()

	// The host restarts: its jobs are killed with it, and the handle names
	// nothing in the new one.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	bounded.Receive(t, waited, "dsh serve's exit")
	waitGone(t, marker, 10*time.Second)
	url, token, _ = serveHTTPComp(t, f, env, "--release-grace", "300ms")
	again := connectHTTPAt(t, ctx, url, token, "2025-11-25", handle)
	defer again.Close()
	if r, _ := again.InitializeResult().Meta["dev.dsh/resumed"].(bool); r || again.InitializeResult().Meta["dev.dsh/resume"] == handle {
		t.Fatalf("a handle of the host before the restart: %v", again.InitializeResult().Meta)
	}
}

func jobOutput(t *testing.T, ctx context.Context, cs *mcp.ClientSession, id string) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_output", Arguments: map[string]any{"job_id": id}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func structuredJobID(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	var job struct {
		JobID string `json:"jobId"`
	}
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &job); err != nil || job.JobID == "" {
		t.Fatalf("no job id in %s (%q)", b, text(t, r))
	}
	return job.JobID
}
