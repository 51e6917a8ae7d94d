package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
)

// Resumable owners through the TypeScript SDK (test/mcp-node/resume.mjs)
// and the real dsh serve --http: a client that ends its session and opens
// a new one with its resume handle gets its background job back; a client
// without the handle, or of another principal with it, starts afresh; the
// job's command outlives the sessions and ends with the host.
func TestMCPNodeResume(t *testing.T) {
	dir, node := tsSDK(t)
	type call struct {
		Text       string `json:"text"`
		IsError    bool   `json:"isError"`
		Structured struct {
			JobID  string `json:"jobId"`
			Status string `json:"status"`
			Jobs   []struct {
				JobID, Status, Command string
			} `json:"jobs"`
		} `json:"structured"`
	}
	type session struct {
		SessionID string         `json:"sessionId"`
		Meta      map[string]any `json:"meta"`
		JobOutput call           `json:"jobOutput"`
		JobList   call           `json:"jobList"`
	}
	var r struct {
		First      session `json:"first"`
		Started    call    `json:"started"`
		JobID      string  `json:"jobId"`
		FirstEnded bool    `json:"firstEnded"`
		Stale      int     `json:"staleStatus"`
		Back       session `json:"back"`
		Fresh      session `json:"fresh"`
		Other      session `json:"other"`
	}

	url, token, serve := serveHTTPComp(t, comp(t, resumableComp), []string{"DSH_TEST_CI_TOKEN=" + ciToken}, "--release-grace", "300ms")
	marker := strconv.Itoa(600000+os.Getpid()%99999) + ".5"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "resume.mjs", marker, url, token, ciToken)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node resume client: %v\n%s\n%s", err, out, stderr)
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	handle, _ := r.First.Meta["dev.dsh/resume"].(string)
	if len(handle) != 32 || strings.Trim(handle, "0123456789abcdef") != "" || r.First.SessionID == "" {
		t.Fatalf("first session %s: want a session and a 32-hex resume handle in the initialize _meta", out)
	}
	if _, ok := r.First.Meta["dev.dsh/resumed"]; ok {
		t.Errorf("first session presented no handle but was told resumed: %v", r.First.Meta)
	}
	if r.JobID == "" || r.Started.IsError {
		t.Fatalf("background start: %+v", r.Started)
	}
	if !r.FirstEnded || r.Stale != 404 {
		t.Errorf("the first session: terminated %v, a request on it answered %d; want it terminated and 404", r.FirstEnded, r.Stale)
	}

	// Back with the handle: the same owner, its job still running.
	if resumed, _ := r.Back.Meta["dev.dsh/resumed"].(bool); !resumed || r.Back.Meta["dev.dsh/resume"] != handle {
		t.Errorf("came back with the handle: %v, want resumed and the same handle", r.Back.Meta)
	}
	if r.Back.SessionID == "" || r.Back.SessionID == r.First.SessionID {
		t.Errorf("sessions %q then %q: want a new one", r.First.SessionID, r.Back.SessionID)
	}
	if o := r.Back.JobOutput; o.IsError || !strings.Contains(o.Text, "still running") || o.Structured.Status != "running" {
		t.Errorf("job_output after coming back: %+v, want the job running", o)
	}
	if l := r.Back.JobList; l.IsError || len(l.Structured.Jobs) != 1 || l.Structured.Jobs[0].JobID != r.JobID ||
		l.Structured.Jobs[0].Status != "running" || l.Structured.Jobs[0].Command != "sleep "+marker || !strings.Contains(l.Text, "sleep "+marker) {
		t.Errorf("job_list after coming back: %+v, want %s running sleep %s", l, r.JobID, marker)
	}

	// Without the handle: a fresh owner, no jobs.
	if _, ok := r.Fresh.Meta["dev.dsh/resumed"]; ok || r.Fresh.Meta["dev.dsh/resume"] == handle {
		t.Errorf("a client without the handle: %v, want a handle of its own and no resumed", r.Fresh.Meta)
	}
	if l := r.Fresh.JobList; l.IsError || len(l.Structured.Jobs) != 0 || !strings.Contains(l.Text, "no background jobs") {
		t.Errorf("job_list of a client without the handle: %+v, want none of the other owner's jobs", l)
	}

	// Another principal with the handle: told it was not resumed, no jobs.
	if resumed, ok := r.Other.Meta["dev.dsh/resumed"].(bool); !ok || resumed || r.Other.Meta["dev.dsh/resume"] == handle {
		t.Errorf("another principal presenting the handle: %v, want resumed false and a handle of its own", r.Other.Meta)
	}
	if l := r.Other.JobList; l.IsError || len(l.Structured.Jobs) != 0 || !strings.Contains(l.Text, "no background jobs") {
		t.Errorf("job_list of another principal: %+v", l)
	}
	if o := r.Other.JobOutput; !o.IsError || !strings.Contains(o.Text, "no such job") {
		t.Errorf("job_output of another principal on the job: %+v, want no such job", o)
	}

	// Every session has ended, but the owner waits resumeWithin (2m): the
	// command still runs. It ends with the host.
	if len(testplugins.Matching("sleep "+marker)) == 0 {
		t.Fatalf("sleep %s is gone after the sessions ended; the resumable owner should keep it", marker)
	}
	_ = serve.Process.Signal(syscall.SIGTERM)
	waited := make(chan error, 1)
	go func() { waited <- serve.Wait() }()
	bounded.Receive(t, waited, "dsh serve's exit")
	waitGone(t, "sleep "+marker, 10*time.Second)
}
