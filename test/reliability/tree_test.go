package reliability

import (
	"context"
	"strings"
	"testing"
	"time"
)

// After a command whose tree is killed (a leftover background child, a
// timeout, a job_kill), later commands in the same host still run.
func TestKilledTreeDoesNotPoisonTheHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := startServe(t, ctx, toolsComp)
	cases := []struct {
		name, want string
		args       map[string]any
	}{
		{"a background child outliving its command", "started", map[string]any{"command": "sleep 2 & echo started"}},
		{"a timeout", "[timed out after 300ms]", map[string]any{"command": "sleep 30", "timeoutMs": 300}},
	}
	for _, c := range cases {
		f := fault(t, "killed tree: "+c.name)
		out, _ := s.bash(t, ctx, c.args)
		if !strings.Contains(out, c.want) {
			t.Fatalf("%s: got %q, want %q in it", c.name, out, c.want)
		}
		f.Saw("%q", strings.TrimSpace(strings.ReplaceAll(out, "\n", " ")))
		s.commandsRun(t, ctx, 20)
		f.Saw("20 later commands exit 0")
	}
	f := fault(t, "killed tree: job_kill")
	out, _ := s.bash(t, ctx, map[string]any{"command": "sleep 30", "run_in_background": true})
	id := jobID(out)
	if id == "" {
		t.Fatalf("no job id in %q", out)
	}
	if out, err := s.call(ctx, "job_kill", map[string]any{"job_id": id}); err != nil || !strings.Contains(out, "killed") {
		t.Fatalf("job_kill: %q %v", out, err)
	}
	f.Saw("job %s killed", id)
	s.commandsRun(t, ctx, 20)
	f.Saw("20 later commands exit 0")
}
