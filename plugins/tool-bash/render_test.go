package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/plugins/jobs/jobsv1"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/plugins/subprocess/subprocessv1"
)

// Golden files hold every text the model reads; a change to one is a
// deliberate change to what the model sees. Regenerate with -update.
var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s changed:\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func code(n int32) *int32 { return &n }

func out(s string) *subprocessv1.Collected {
	return &subprocessv1.Collected{Data: []byte(s), Total: int64(len(s))}
}

func TestRenderGolden(t *testing.T) {
	cases := map[string]*shell.RunResult{
		"exit0":        {ExitCode: code(0), Stdout: out("hello\n"), Stderr: out("")},
		"exit0-empty":  {ExitCode: code(0), Stdout: out(""), Stderr: out("")},
		"exit3":        {ExitCode: code(3), Stdout: out("partial\n"), Stderr: out("boom\n")},
		"exit3-empty":  {ExitCode: code(3), Stdout: out(""), Stderr: out("")},
		"stderr-only":  {ExitCode: code(1), Stdout: out(""), Stderr: out("no such file")},
		"no-newline":   {ExitCode: code(2), Stdout: out("a"), Stderr: out("b")},
		"timeout":      {Signal: "SIGTERM", TimedOut: true, TimeoutMs: 300, Stdout: out("tick\n"), Stderr: out("")},
		"signal":       {Signal: "SIGKILL", Stdout: out(""), Stderr: out("")},
		"aborted":      {Signal: "SIGTERM", Aborted: true, Stdout: out("x\n"), Stderr: out("")},
		"invalid-utf8": {ExitCode: code(0), Stdout: &subprocessv1.Collected{Data: []byte("a\xffb\n")}, Stderr: out("")},
		"truncated": {ExitCode: code(0),
			Stdout: &subprocessv1.Collected{Data: []byte("99999\n100000\n"), Total: 588895, Truncated: true, Dropped: 588882, SpillPath: "/run/dsh/spill/cli/p1.stdout"},
			Stderr: out("")},
		"truncated-both-timeout": {Signal: "SIGKILL", TimedOut: true, TimeoutMs: 1000,
			Stdout: &subprocessv1.Collected{Data: []byte("end\n"), Truncated: true, SpillPath: "/s/p2.stdout"},
			Stderr: &subprocessv1.Collected{Data: []byte("warn\n"), Truncated: true, SpillPath: "/s/p2.stderr"}},
	}
	for name, r := range cases {
		text := renderRun(r)
		golden(t, "run-"+name, text)
		// The exit marker is always recoverable.
		st := shell.ParseExitStatus(text)
		wantCode := 0
		if r.ExitCode != nil {
			wantCode = int(*r.ExitCode)
		}
		if st.Signal != r.Signal || (r.Signal == "" && st.ExitCode != wantCode) {
			t.Errorf("%s: ParseExitStatus = %+v", name, st)
		}
		if runFailed(r) != (strings.Contains(text, "\n[exit code: ") || strings.Contains(text, "[killed by signal: ") || r.TimedOut || r.Aborted) {
			t.Errorf("%s: isError disagrees with the markers", name)
		}
	}
}

func TestRenderReadGolden(t *testing.T) {
	cases := map[string]*jobsv1.JobRead{
		"running":       {Job: &jobsv1.Job{Id: "j1", Status: "running"}, Stdout: []byte("line1\nline2\n")},
		"running-empty": {Job: &jobsv1.Job{Id: "j1", Status: "running"}},
		"finished-0":    {Job: &jobsv1.Job{Id: "j2", Status: "completed", ExitCode: code(0)}, Stdout: []byte("done\n"), Stderr: []byte("warning\n")},
		"finished-4":    {Job: &jobsv1.Job{Id: "j3", Status: "completed", ExitCode: code(4)}},
		"killed":        {Job: &jobsv1.Job{Id: "j4", Status: "killed", Signal: "SIGTERM"}, Stdout: []byte("partial")},
		"lossy":         {Job: &jobsv1.Job{Id: "j5", Status: "running"}, Stdout: []byte("tail\n"), Lossy: true, StdoutSpillPath: "/s/p9.stdout"},
	}
	for name, r := range cases {
		golden(t, "read-"+name, renderRead(r))
	}
	golden(t, "started", renderStarted(&jobsv1.Job{Id: "j7", Pid: 4242}))
}

func TestToolSpecsGolden(t *testing.T) {
	for name, mode := range map[string]shell.SandboxMode{"local": "", "sandboxed": shell.WorkspaceWrite} {
		var b strings.Builder
		for _, s := range toolSpecs(mode, 120000, 600000) {
			b.WriteString("## " + s.Name + " — " + s.Title + "\n" + s.Description + "\n\nschema: " + s.InputSchema + "\n\n")
		}
		golden(t, "tools-"+name, b.String())
	}
	// The sandbox fields appear only under a sandboxing executor.
	if strings.Contains(toolSpecs("", 1, 2)[0].InputSchema, "sandbox_permissions") {
		t.Error("sandbox_permissions advertised without a sandboxing executor")
	}
	if !strings.Contains(toolSpecs(shell.ReadOnly, 1, 2)[0].InputSchema, "justification") {
		t.Error("justification missing under a sandboxing executor")
	}
}
