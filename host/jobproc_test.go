//go:build unix

package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ctx.jobs reaches a job's process through the executor that started it:
// a job lives on across the executor's reload and its crash, and still
// gives its remaining output, its exit code and its finished notice.

// startJob starts a background command for owner and returns its job id.
func startJob(t *testing.T, h *Host, owner, cmd string) string {
	t.Helper()
	res := callTool(t, h, owner, "bash", bashCall(cmd, "run_in_background", true))
	var job struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(res.Structured, &job); err != nil || job.JobID == "" {
		t.Fatalf("start %q: %q %v", cmd, res.Text, err)
	}
	return job.JobID
}

// gated is a command that prints before, waits for gate to exist, prints
// after and exits with code.
func gated(gate, before, after, code string) string {
	return "echo " + before + "; while [ ! -e " + gate + " ]; do sleep 0.02; done; echo " + after + "; exit " + code
}

// readUntil reads job id with job_output until its text holds want,
// returning everything read.
func readUntil(t *testing.T, h *Host, owner, id, want string) string {
	t.Helper()
	var all strings.Builder
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := callTool(t, h, owner, "job_output", map[string]string{"job_id": id})
		all.WriteString(r.Text + "\n")
		if strings.Contains(all.String(), want) {
			return all.String()
		}
	}
	got := all.String()
	t.Fatalf("job %s never said %q; read …%q", id, want, got[max(0, len(got)-2000):])
	return ""
}

// noticeOf waits for the finished notice of job id in the results of new
// commands, which must still run, and returns its line.
func noticeOf(t *testing.T, h *Host, owner, id string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r := callTool(t, h, owner, "bash", bashCall("echo fresh"))
		if !strings.HasSuffix(r.Text, "fresh") {
			t.Fatalf("a new command: %q", r.Text)
		}
		for _, l := range strings.Split(r.Text, "\n") {
			if strings.HasPrefix(l, "[job "+id+" finished") {
				return l
			}
		}
	}
	t.Fatalf("no finished notice for job %s", id)
	return ""
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// `dsh reload bash` under two running jobs: the one read before the reload
// is read to its end after it, through the new executor; the one nobody
// reads (another owner's, so that no read of the first takes its notice)
// is noticed when it finishes.
func TestJobsAcrossExecutorReload(t *testing.T) {
	h := startTools(t, toolsYAML)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	read := startJob(t, h, "agent", gated(gate, "before", "after", "7"))
	quiet := startJob(t, h, "agent2", gated(gate, "q1", "q2", "4"))
	if all := readUntil(t, h, "agent", read, "before"); !strings.Contains(all, "[job "+read+" is still running]") {
		t.Fatalf("before the reload: %q", all)
	}
	old := pidOf(h, "bash")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.Reload(ctx, "bash"); err != nil {
		t.Fatal(err)
	}
	// The jobs' waits on the old executor are cut by its stop, not
	// drained: they last as long as the jobs.
	if d := time.Since(start); d > h.drainTimeout()/2 {
		t.Errorf("the reload took %v: it waited for the jobs' waits", d)
	}
	if pid := pidOf(h, "bash"); pid == old || pid == 0 {
		t.Fatalf("the executor was not reloaded (pid %d, was %d)", pid, old)
	}
	if syscall.Kill(old, 0) == nil {
		t.Fatalf("the old executor (pid %d) still runs", old)
	}
	// Still running under the new executor, and nothing is read twice.
	r := callTool(t, h, "agent", "job_output", map[string]string{"job_id": read})
	if strings.Contains(r.Text, "before") || !strings.Contains(r.Text, "is still running") {
		t.Fatalf("first read after the reload: %q", r.Text)
	}
	touch(t, gate)
	all := readUntil(t, h, "agent", read, "finished]")
	if !strings.Contains(all, "after") || strings.Contains(all, "before") || !strings.HasSuffix(strings.TrimSpace(all), "[job "+read+" finished]\n[exit code: 7]") {
		t.Fatalf("after the reload: %q", all)
	}
	if n := noticeOf(t, h, "agent2", quiet); !strings.Contains(n, "exited with code 4") {
		t.Fatalf("notice of the unread job: %q", n)
	}
	if all := readUntil(t, h, "agent2", quiet, "finished]"); !strings.Contains(all, "q1\nq2") || !strings.Contains(all, "[exit code: 4]") {
		t.Fatalf("the unread job's output: %q", all)
	}
}

// kill -9 of dsh-bash-local under a running job: the job is the host's and
// runs on; it finishes while the executor restarts, and its notice, its
// remaining output and its exit code arrive once the executor is back,
// where a new command runs too.
func TestJobSurvivesExecutorKill(t *testing.T) {
	h := startTools(t, toolsYAML)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	id := startJob(t, h, "agent", gated(gate, "one", "two", "3"))
	readUntil(t, h, "agent", id, "one")
	old := pidOf(h, "bash")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	touch(t, gate) // the job ends while its executor is away
	for deadline := time.Now().Add(20 * time.Second); pidOf(h, "bash") == old && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	waitActive(t, h)
	if pidOf(h, "bash") == old {
		t.Fatal("the executor was not restarted")
	}
	if n := noticeOf(t, h, "agent", id); !strings.Contains(n, "exited with code 3") {
		t.Fatalf("notice: %q", n)
	}
	r := callTool(t, h, "agent", "job_output", map[string]string{"job_id": id})
	if r.Text != "two\n[job "+id+" finished]\n[exit code: 3]" || !r.IsError {
		t.Fatalf("the remaining output: %q (isError %v)", r.Text, r.IsError)
	}
}

// A running job holds no call on its executor (a Wait held open per job
// was a stream and its goroutines on both sides): no call id stays open,
// and the host's goroutines grow by its process's alone (its two pipes and
// its exit). Its end is still told, by the executor, once it comes.
func TestRunningJobsHoldNoCalls(t *testing.T) {
	h := startTools(t, toolsYAML)
	startJob(t, h, "agent", "true") // the connections are up
	settle := func() int {
		time.Sleep(300 * time.Millisecond)
		return runtime.NumGoroutine()
	}
	before := settle()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	const n = 8
	var ids []string
	for i := range n {
		ids = append(ids, startJob(t, h, "agent", gated(gate, "started", "done", strconv.Itoa(i))))
	}
	for _, id := range ids {
		readUntil(t, h, "agent", id, "started")
	}
	h.calls.mu.Lock()
	open := len(h.calls.m)
	h.calls.mu.Unlock()
	if open != 0 {
		t.Errorf("%d calls open while %d jobs run", open, n)
	}
	// Goroutines of the reads may take a moment to end; a Wait held per
	// job would be 2 more a job for good.
	limit := before + 3*n + n/2
	after := settle()
	for deadline := time.Now().Add(10 * time.Second); after > limit && time.Now().Before(deadline); {
		after = settle()
	}
	if after > limit {
		t.Errorf("%.1f goroutines a running job (%d before, %d after), want its process's 3", float64(after-before)/n, before, after)
	}
	touch(t, gate)
	for i, id := range ids {
		all := readUntil(t, h, "agent", id, "finished]")
		marker := "[exit code: " + strconv.Itoa(i) + "]"
		if !strings.Contains(all, "done") || strings.Contains(all, marker) != (i != 0) {
			t.Fatalf("job %s: %q", id, all)
		}
	}
}
