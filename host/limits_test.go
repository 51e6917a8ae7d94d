//go:build linux

package host

import (
	"strings"
	"testing"
)

// Limits configured on the executor stop a fork bomb and an allocation,
// in the foreground and in a job; the model reads which limit and its
// value, and the next command runs.
const limitsYAML = `
settings:
  shell:
    graceMs: 200
    maxProcesses: 50
    maxMemoryBytes: 67108864
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`

// forkBomb starts sleeps until a fork fails (dash stops there; bash would
// retry for half a minute).
const forkBomb = `dash -c 'i=0; while [ $i -lt 5000 ]; do sleep 30 & i=$((i+1)); done'`

func TestToolBashLimits(t *testing.T) {
	h := startTools(t, limitsYAML)
	if st := h.sub.Limits(); !st.Available || st.Processes == "" || st.Memory == "" {
		t.Skipf("no limits on this host: %s", st)
	}
	const procs = "[limit: the command reached its limit of 50 processes and threads alive at once, so starting another failed]"
	res := callTool(t, h, "agent", "bash", bashCall(forkBomb))
	if !strings.Contains(res.Text, procs) || !res.IsError || !strings.Contains(string(res.Structured), `"limits":[{"limit":"processes","value":50}]`) {
		t.Fatalf("fork bomb: %q %s", res.Text, res.Structured)
	}
	if res := callTool(t, h, "agent", "bash", bashCall("echo next")); res.Text != "next" {
		t.Fatalf("the command after the fork bomb: %q", res.Text)
	}
	const mem = "[limit: a process of the command was killed on reaching the command's memory limit of 64 MiB]"
	res = callTool(t, h, "agent", "bash", bashCall("set -o pipefail; head -c 200M /dev/zero | tail | wc -c"))
	if !strings.Contains(res.Text, mem) || !res.IsError {
		t.Fatalf("allocation: %q", res.Text)
	}
	if res := callTool(t, h, "agent", "bash", bashCall("head -c 10M /dev/zero | tail | wc -c")); res.Text != "10485760" {
		t.Fatalf("the command after the allocation: %q", res.Text)
	}
	// Jobs: their final read says it.
	for cmd, want := range map[string]string{
		forkBomb:                                "[limit: the job reached its limit of 50 processes and threads alive at once, so starting another failed]",
		"head -c 200M /dev/zero | tail | wc -c": "[limit: a process of the job was killed on reaching the job's memory limit of 64 MiB]",
	} {
		res = callTool(t, h, "agent", "bash", bashCall(cmd, "run_in_background", true))
		var id string
		if i := strings.Index(res.Text, "[job "); i >= 0 {
			id = strings.Fields(res.Text[i+5:])[0]
		}
		out := readJobToEnd(t, h, "agent", id)
		if id == "" || !strings.Contains(out, "[job "+id+" finished]\n"+want) {
			t.Fatalf("job %q of %s: %q", id, cmd, out)
		}
	}
}
