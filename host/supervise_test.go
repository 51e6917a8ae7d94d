//go:build unix

package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins/probev1"
	"github.com/dshrun/dsh/registry"
)

func pidOf(h *Host, id string) int {
	en := h.find(id)
	if en == nil {
		return 0
	}
	if ld := en.current(); ld != nil {
		return ld.proc.Pid()
	}
	return 0
}

// waitActive waits until every entry is active again.
func waitActive(t *testing.T, h *Host) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, st := range h.Status() {
			if !st.Disabled && (st.State != "active" || st.Pid == 0) {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not all active: %+v", h.Status())
}

// kill -9 of the executor: it restarts in place after a backoff (RESTARTING
// in status) while its key stays bound, its dependents stay active and their
// tools stay listed; the next call succeeds.
func TestCrashRestartsWithBackoff(t *testing.T) {
	var mu sync.Mutex
	var events []string
	opts := testOptions(t, func(ev registry.Event) {
		mu.Lock()
		events = append(events, fmt.Sprintf("%s:%s(%s)", ev.Scope, ev.To, ev.Reason))
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, toolsYAML), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	mu.Lock()
	before := len(events)
	mu.Unlock()
	old := pidOf(h, "bash")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	sawRestarting := false
	for deadline := time.Now().Add(20 * time.Second); pidOf(h, "bash") == old && time.Now().Before(deadline); {
		for _, st := range h.Status() {
			if st.ID == "bash" && st.State == "restarting" {
				sawRestarting = true
				if len(h.Tools()) != 4 {
					t.Errorf("tools withdrawn while the executor restarts: %v", h.Tools())
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitActive(t, h)
	if pidOf(h, "bash") == old {
		t.Fatal("not restarted")
	}
	if !sawRestarting {
		t.Error("dsh status never said restarting during the 200 ms backoff")
	}
	mu.Lock()
	seq := strings.Join(events[before:], " ")
	mu.Unlock()
	if seq != "" {
		t.Errorf("a crash changed registry states (a restart is not a withdrawal): %s", seq)
	}
	res := callTool(t, h, "agent", "bash", bashCall("echo back"))
	if res.Text != "back" {
		t.Fatalf("after restart: %q", res.Text)
	}
	var restarts int
	for _, st := range h.Status() {
		if st.ID == "bash" {
			restarts = st.Restarts
		}
	}
	if restarts != 1 {
		t.Errorf("restarts = %d", restarts)
	}
}

// Crashing again and again makes a crash loop: FAILED, until reloaded.
func TestCrashLoop(t *testing.T) {
	h := startTools(t, toolsYAML)
	for i := 0; i < crashLimit; i++ {
		pid := pidOf(h, "env")
		deadline := time.Now().Add(40 * time.Second)
		for pid == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			pid = pidOf(h, "env")
		}
		if pid == 0 {
			t.Fatalf("crash %d: no process to kill: %+v", i, h.Status())
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for pidOf(h, "env") == pid {
			if time.Now().After(deadline) {
				t.Fatalf("crash %d: pid %d is still the process of env: %+v", i, pid, h.Status())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for h.find("env").getScope().State() != registry.Failed && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if s := h.find("env").getScope(); s.State() != registry.Failed || !strings.Contains(s.Reason(), "crash loop") {
		t.Fatalf("env: %s %q", s.State(), s.Reason())
	}
	// Not re-entered implicitly; an explicit reload brings it back.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Reload(ctx, "env"); err != nil {
		t.Fatal(err)
	}
	waitActive(t, h)
	if r := callTool(t, h, "agent", "bash", bashCall("echo $DSH_PROJECT")); r.Text != "demo" {
		t.Fatalf("after reload: %q", r.Text)
	}
}

// Reloading the executor under a streaming background job and steady
// foreground calls: same job id, no gap, no repeat, no failed call, and the
// consumer (tool-bash) keeps running.
func TestReloadExecutorKeepsJobsAndCalls(t *testing.T) {
	h := startTools(t, toolsYAML)
	toolsPid := pidOf(h, "tools")
	res := callTool(t, h, "agent", "bash", bashCall("for i in $(seq 1 40); do echo l$i; sleep 0.025; done", "run_in_background", true))
	var job struct {
		JobID string `json:"jobId"`
	}
	_ = json.Unmarshal(res.Structured, &job)

	stop := make(chan struct{})
	var failures []string
	var calls int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, _ := json.Marshal(bashCall("echo x"))
			r, err := h.CallTool(context.Background(), ToolCall{Owner: "agent2", Tool: "bash", Arguments: b})
			calls++
			if err != nil || r.Text != "x" {
				failures = append(failures, fmt.Sprintf("%v %v", r, err))
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	oldBash := pidOf(h, "bash")
	var all strings.Builder
	reloaded := false
	for ctx.Err() == nil {
		r := callTool(t, h, "agent", "job_output", map[string]string{"job_id": job.JobID})
		all.WriteString(r.Text + "\n")
		if strings.Contains(r.Text, "finished]") {
			break
		}
		if !reloaded && strings.Contains(all.String(), "l5\n") {
			if err := h.Reload(ctx, "bash"); err != nil {
				t.Fatal(err)
			}
			reloaded = true
		}
		time.Sleep(60 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if !reloaded || pidOf(h, "bash") == oldBash {
		t.Fatal("the executor was not reloaded")
	}
	var lines []string
	for _, l := range strings.Split(all.String(), "\n") {
		if strings.HasPrefix(l, "l") {
			lines = append(lines, l)
		}
	}
	for i, l := range lines {
		if l != fmt.Sprintf("l%d", i+1) {
			t.Fatalf("gap or repeat at %d: %v", i, lines)
		}
	}
	if len(lines) != 40 {
		t.Fatalf("%d lines: %v", len(lines), lines)
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls failed during the reload: %v", len(failures), calls, failures[:min(3, len(failures))])
	}
	if pidOf(h, "tools") != toolsPid {
		t.Error("tool-bash restarted although the executor's description did not change")
	}
	t.Logf("%d foreground calls during the reload, none failed", calls)
}

// Reloading a provider that keeps caller state (shell-env) reloads its
// consumers, which register again: nothing is silently lost.
func TestReloadStatefulProviderReRegisters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, pairYAML), testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	probePid := pidOf(h, "probe")
	if err := h.Reload(ctx, "env"); err != nil {
		t.Fatal(err)
	}
	waitActive(t, h)
	if pidOf(h, "probe") == probePid {
		t.Error("the consumer was kept across a stateful provider's swap")
	}
	resp, err := probev1.NewProbeClient(h.Conn("probe")).Collect(ctx, &probev1.CollectRequest{})
	if err != nil || resp.Env["DSH_PROBE"] != "from-probe" {
		t.Fatalf("after reload: %v %v", resp.GetEnv(), err)
	}
}
