//go:build unix

package host

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// A call with progress reports its latest output line: the first report
// within a second, then one a second at most and only when the line
// changed, each line cleaned; a call without it costs nothing (the host
// never looks at its output while it runs).
func TestCallProgress(t *testing.T) {
	h := startTools(t, toolsYAML)
	callTool(t, h, "agent", "bash", bashCall("echo quiet; sleep 1.2"))
	if n := h.sub.Peeks(); n != 0 {
		t.Fatalf("a call without progress looked at the output %d times", n)
	}

	type report struct {
		at   time.Duration
		line string
	}
	var mu sync.Mutex
	var reports []report
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	progress := Progress{Report: func(line string) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, report{time.Since(start), line})
	}}
	args, _ := json.Marshal(bashCall(`for i in 1 2 3; do printf '\033[32mstep %d\033[0m\n' $i; sleep 1.1; done; printf 'done 10%%\rdone 100%%'; sleep 1.1`))
	res, err := h.CallTool(ctx, ToolCall{Owner: "agent", Tool: "bash", Arguments: args, Progress: progress})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	mu.Lock()
	if len(reports) == 0 || reports[0].at > time.Second {
		t.Fatalf("first report: %+v", reports)
	}
	var lines []string
	for i, r := range reports {
		lines = append(lines, r.line)
		if i > 0 && r.line == reports[i-1].line {
			t.Errorf("report %d repeats %q", i, r.line)
		}
		if i > 0 && r.at-reports[i-1].at < 900*time.Millisecond {
			t.Errorf("reports %d and %d %v apart", i-1, i, r.at-reports[i-1].at)
		}
	}
	got := strings.Join(lines, " | ")
	for _, want := range []string{"step 1", "step 2", "step 3", "done 100%"} {
		if !strings.Contains(got, want) {
			t.Errorf("reports %q lack %q", got, want)
		}
	}
	if strings.ContainsAny(got, "\x1b\r") || strings.Contains(got, "done 10%") {
		t.Errorf("reports not cleaned: %q", got)
	}
	if h.sub.Peeks() == 0 {
		t.Error("no look at the output during a call with progress")
	}
	n := len(reports)
	mu.Unlock()

	// A cancelled call with progress stops reporting when it returns, and
	// the session goes on.
	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(1500*time.Millisecond, ccancel)
	args, _ = json.Marshal(bashCall("while :; do echo tick; sleep 0.3; done"))
	if res, err := h.CallTool(cctx, ToolCall{Owner: "agent", Tool: "bash", Arguments: args, Progress: progress}); err == nil && !res.IsError {
		t.Fatalf("a cancelled call: %+v", res)
	}
	mu.Lock()
	after := len(reports)
	mu.Unlock()
	time.Sleep(2500 * time.Millisecond)
	mu.Lock()
	if len(reports) != after || after <= n {
		t.Errorf("reports: %d before the cancelled call, %d when it returned, %d later", n, after, len(reports))
	}
	mu.Unlock()
	if r := callTool(t, h, "agent", "bash", bashCall("echo next")); r.Text != "next" {
		t.Fatalf("after the cancelled call: %q", r.Text)
	}
}

// A call of the persistent bash tool reports its command's latest line
// as tool-bash's calls do: the command runs in a shell of a terminal,
// not in a process of the call's, and no report shows the typed line or
// the wrapper's markers.
func TestPersistentCallProgress(t *testing.T) {
	h := startTools(t, `
plugins:
  - id: env
    name: shell-env
  - id: term
    name: terminal-bash
  - id: persistent
    name: tool-bash-persistent
`)
	var mu sync.Mutex
	var lines []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	progress := Progress{Report: func(line string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, line)
	}}
	args, _ := json.Marshal(bashCall(`for i in 1 2 3; do printf '\033[32mstep %d\033[0m\n' $i; sleep 1.1; done; printf 'done 10%%\rdone 100%%'; sleep 1.1`))
	res, err := h.CallTool(ctx, ToolCall{Owner: "agent", Tool: "bash", Arguments: args, Progress: progress})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(lines, " | ")
	for _, want := range []string{"step 1", "step 2", "step 3", "done 100%"} {
		if !strings.Contains(got, want) {
			t.Errorf("reports %q lack %q", got, want)
		}
	}
	if strings.ContainsAny(got, "\x1b\r") || strings.Contains(got, "done 10%") || strings.Contains(got, "DSH_PERSISTENT") || strings.Contains(got, "printf") {
		t.Errorf("reports not cleaned, or showing the typed line: %q", got)
	}
}
