//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/plugins/shell"
)

var binDir string

func TestMain(m *testing.M) { testplugins.Main(m, "dsh-tool-pwsh-", &binDir) }

// overBash composes the pwsh tool over bash-local. PowerShell is not
// installed here, and the tool depends on no executor in particular: it
// talks to whatever ctx.shell provider is composed (pwsh-local where
// PowerShell is), so bash-local runs the commands and everything the tool
// adds (the markers, the budget, the jobs, the notices) is what the model
// reads over pwsh-local too.
const overBash = `
settings:
  shell:
    graceMs: 200
plugins:
  - id: env
    name: shell-env
    config:
      facts: {DSH_PROJECT: demo}
  - id: bash
    name: bash-local
  - id: tools
    name: tool-pwsh
`

func start(t *testing.T) *host.Host {
	t.Helper()
	none := func(string) (string, bool) { return "", false }
	comp, err := composition.Parse(filepath.Join(t.TempDir(), "comp.yaml"), []byte(overBash), none)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := host.Start(ctx, comp, host.Options{PluginPath: []string{binDir}, RuntimeBase: t.TempDir(), LookupEnv: none})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

func call(t *testing.T, h *host.Host, tool string, args map[string]any) *host.ToolResult {
	t.Helper()
	b, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.CallTool(ctx, host.ToolCall{Owner: "agent", Tool: tool, Arguments: b})
	if err != nil {
		t.Fatalf("%s %s: %v", tool, b, err)
	}
	return res
}

// The tool's schema and description over an executor that does not
// sandbox: no escalation fields, the executor's defaults in the words.
func TestToolsOverAnExecutor(t *testing.T) {
	h := start(t)
	var names []string
	for _, ti := range h.Tools() {
		names = append(names, ti.Name+"@"+ti.Plugin)
		if ti.Name != "pwsh" {
			continue
		}
		if !strings.HasPrefix(ti.Description, "Run a PowerShell command") || !strings.Contains(ti.Description, "(default 120000 ms, at most 600000 ms)") {
			t.Errorf("description:\n%s", ti.Description)
		}
		if s := string(ti.InputSchema); strings.Contains(s, "sandbox_permissions") || strings.Contains(s, "justification") {
			t.Errorf("escalation fields without a confining executor: %s", s)
		}
	}
	if strings.Join(names, ",") != "job_kill@tools,job_list@tools,job_output@tools,pwsh@tools" {
		t.Fatalf("tools: %v", names)
	}
}

var pid = regexp.MustCompile(`\(pid \d+\)`)

// What the model reads of commands run through the pwsh tool, with the
// markers the seam's ParseExitStatus reads and the facts that agree.
func TestRenderOverAnExecutor(t *testing.T) {
	h := start(t)
	var all strings.Builder
	show := func(tool string, args map[string]any, r *host.ToolResult) {
		b, _ := json.Marshal(args)
		fmt.Fprintf(&all, "## %s %s (isError %v)\n%s\n\n", tool, b, r.IsError, pid.ReplaceAllString(r.Text, "(pid N)"))
	}
	for _, c := range []struct {
		command   string
		timeoutMs int
		code      int
		signal    string
	}{
		{"echo hi", 0, 0, ""},
		{"echo out; echo err >&2; exit 3", 0, 3, ""},
		{"exit 3", 0, 3, ""},
		{"echo -n tick; sleep 5", 300, 0, "SIGTERM"},
		{"kill -KILL $$", 0, 0, "SIGKILL"},
		{"printf '\\000\\001\\002\\003'", 0, 0, ""},
		{`echo "$DSH_PROJECT"`, 0, 0, ""},
	} {
		args := map[string]any{"command": c.command, "description": "test"}
		if c.timeoutMs > 0 {
			args["timeoutMs"] = c.timeoutMs
		}
		r := call(t, h, "pwsh", args)
		show("pwsh", args, r)
		st := shell.ParseExitStatus(r.Text)
		var facts struct {
			ExitCode *int   `json:"exitCode"`
			Signal   string `json:"signal"`
		}
		if err := json.Unmarshal(r.Structured, &facts); err != nil {
			t.Fatal(err)
		}
		if st.ExitCode != c.code || st.Signal != c.signal || facts.Signal != c.signal || (c.signal == "" && *facts.ExitCode != c.code) {
			t.Errorf("%s: parsed %+v, facts %+v", c.command, st, facts)
		}
		if r.IsError != (c.code != 0 || c.signal != "") {
			t.Errorf("%s: isError %v", c.command, r.IsError)
		}
	}

	// A background job through ctx.jobs: its start, its output read to
	// its end with the exit marker last (the reads while it runs, however
	// many, shown as one), and one killed.
	bg := map[string]any{"command": "echo started; sleep 0.3; echo done; exit 4", "description": "test", "run_in_background": true}
	show("pwsh", bg, call(t, h, "pwsh", bg))
	read := map[string]any{"job_id": "j1"}
	var reads []string
	for deadline := time.Now().Add(20 * time.Second); ; {
		r := call(t, h, "job_output", read)
		for _, line := range strings.Split(r.Text, "\n") {
			if line != "" && line != "[job j1 is still running]" {
				reads = append(reads, line)
			}
		}
		if strings.Contains(r.Text, "[job j1 finished]") {
			if st := shell.ParseExitStatus(r.Text); st.ExitCode != 4 || !r.IsError {
				t.Errorf("job_output: parsed %+v, isError %v", st, r.IsError)
			}
			show("job_output", read, &host.ToolResult{Text: strings.Join(reads, "\n"), IsError: r.IsError})
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("j1 did not finish: %q", r.Text)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sleeper := map[string]any{"command": "sleep 60", "description": "test", "run_in_background": true}
	show("pwsh", sleeper, call(t, h, "pwsh", sleeper))
	kill := map[string]any{"job_id": "j2"}
	show("job_kill", kill, call(t, h, "job_kill", kill))
	golden.Check(t, "over-bash-local", all.String())
}
