//go:build unix

package reliability

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A background job is read, killed and waited on through the executor
// that started it; the job is the host's, so it outlives a crash of that
// executor and still tells its end.
func TestJobAcrossExecutorCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := startServe(t, ctx, pulseComp)
	gate := filepath.Join(t.TempDir(), "gate")
	f := fault(t, "kill -9 of bash-local under a background job")
	started, _ := s.bash(t, ctx, map[string]any{
		"command":           "echo early; while [ ! -e " + gate + " ]; do sleep 0.02; done; echo late; exit 6",
		"run_in_background": true,
	})
	jid := jobID(started)
	var out string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out, "early"); time.Sleep(20 * time.Millisecond) {
		more, err := s.call(ctx, "job_output", map[string]any{"job_id": jid})
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the job's first output: %q %v", out, err)
		}
		out += more
	}
	pid := pluginPid(t, "bash-local")
	killed(t, pid, syscall.SIGKILL)
	if err := os.WriteFile(gate, nil, 0o600); err != nil { // it ends while its executor is away
		t.Fatal(err)
	}
	f.Saw("the job finished while its executor restarted")
	notice := ""
	for deadline := time.Now().Add(20 * time.Second); notice == ""; time.Sleep(50 * time.Millisecond) {
		got, isErr := s.bash(t, ctx, map[string]any{"command": "echo after"})
		if !strings.HasSuffix(got, "after") || isErr || time.Now().After(deadline) {
			t.Fatalf("a command after the crash (no notice yet): %q", got)
		}
		for _, l := range strings.Split(got, "\n") {
			if strings.HasPrefix(l, "[job "+jid+" finished") {
				notice = l
			}
		}
	}
	if !strings.Contains(notice, "exited with code 6") {
		t.Fatalf("notice: %q", notice)
	}
	f.Saw("commands run after the restart; the next one told %q", notice[:strings.Index(notice, ";")]+"]")
	rest, err := s.call(ctx, "job_output", map[string]any{"job_id": jid})
	if err != nil || rest != "late\n[job "+jid+" finished]\n[exit code: 6]" {
		t.Fatalf("the job's remaining output: %q %v", rest, err)
	}
	f.Saw("job_output gave the rest and the exit code")
	if pluginPid(t, "bash-local") == pid {
		t.Fatal("bash-local was not restarted")
	}
}
