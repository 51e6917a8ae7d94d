//go:build unix

package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/internal/testplugins/probev1"
)

// Faults of plugin processes, through the real binaries: a hung executor,
// crashes of each plugin during a call and between calls.

// A quick pulse, so a hung plugin is found within seconds (three misses of
// 200ms + 2s each), with each ask's timeout long enough that a healthy
// plugin on a loaded machine answers it: a shorter one kills plugins that
// are only slow, and fails whatever calls they hold.
const pulseYAML = `
host:
  pingInterval: 200ms
  pingTimeout: 2s
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
    name: tool-bash
  - id: probe
    name: probe
    config:
      fact: registered-by-probe
`

func stateOf(h *Host, id string) (string, string) {
	for _, st := range h.Status() {
		if st.ID == id {
			return st.State, st.Reason
		}
	}
	return "", ""
}

// A SIGSTOPped executor: the call in flight is answered (not held forever),
// the pulse reports it unhealthy and kills it, it restarts, a background
// job started before survives, and the next commands run.
func TestStoppedExecutorIsKilledAndRestarted(t *testing.T) {
	h := startTools(t, pulseYAML)
	// The job runs until the test opens its gate: across the fault, however
	// long the pulse takes to find it.
	gate := filepath.Join(t.TempDir(), "gate")
	job := callTool(t, h, "agent", "bash", bashCall("until [ -e "+gate+" ]; do sleep 0.05; done; echo job-survived", "run_in_background", true))
	id := jobIDOf(t, job.Text)
	// A foreground command runs when the executor stops: its tree must
	// die with the executor, not run on.
	marker := strconv.Itoa(600000 + os.Getpid()%99999)
	done := make(chan *ToolResult, 1)
	go func() {
		done <- callTool(t, h, "agent", "bash", bashCall("setsid sleep "+marker+" & sleep "+marker, "timeoutMs", 60000))
	}()
	for deadline := time.Now().Add(20 * time.Second); len(testplugins.Matching("sleep "+marker)) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the foreground command did not start")
		}
	}
	pid := pidOf(h, "bash")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	sawUnhealthy := false
	var res *ToolResult
	// The pulse finds it within its misses, each an interval and a
	// timeout; then the kill, its reaping and the answer's way back.
	within := pulseMisses*(h.pingInterval()+h.pingTimeout()) + 20*time.Second
	for deadline := time.Now().Add(within); res == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("the call on a stopped executor got no answer within %v; status %+v", within, h.Status())
		}
		if st, _ := stateOf(h, "bash"); st == "unhealthy" {
			sawUnhealthy = true
		}
		select {
		case res = <-done:
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !sawUnhealthy {
		t.Error("dsh status never said unhealthy")
	}
	if !res.IsError || !strings.Contains(res.Text, `plugin "bash"`) || !strings.Contains(res.Text, "stopped answering its health checks") || strings.Contains(res.Text, "rpc error") {
		t.Fatalf("the call in flight: %q", res.Text)
	}
	if left := waitGone("sleep "+marker, time.Now().Add(10*time.Second)); len(left) > 0 {
		t.Fatalf("the foreground tree outlived its hung executor: %v", left)
	}
	waitActive(t, h)
	if pidOf(h, "bash") == pid {
		t.Fatal("the stopped executor was not replaced")
	}
	for i := 0; i < 5; i++ {
		if r := callTool(t, h, "agent", "bash", bashCall("echo after")); r.Text != "after" || r.IsError {
			t.Fatalf("command %d after the restart: %q", i, r.Text)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := readJobToEnd(t, h, "agent", id); !strings.Contains(out, "job-survived") {
		t.Fatalf("the background job did not survive: %q", out)
	}
}

// Right after a kill -9 of the executor or of the tool plugin, the next
// call waits for the restart and runs: the tool is never withdrawn.
func TestCallRightAfterACrashRuns(t *testing.T) {
	h := startTools(t, pulseYAML)
	for _, id := range []string{"bash", "tools", "bash", "tools"} {
		pid := pidOf(h, id)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitDead(t, pid)
		for i := 0; i < 3; i++ {
			if r := callTool(t, h, "agent", "bash", bashCall("echo alive")); r.Text != "alive" || r.IsError {
				t.Fatalf("call %d right after kill -9 of %s: %q", i, id, r.Text)
			}
		}
		if pidOf(h, id) == pid {
			t.Fatalf("%s was not restarted", id)
		}
	}
}

// A crash of shell-env: the bash call in flight completes, later calls
// run, and the fact another plugin registered with it is back.
func TestShellEnvCrashDuringACall(t *testing.T) {
	h := startTools(t, pulseYAML)
	if r := callTool(t, h, "agent", "bash", bashCall("echo $DSH_PROBE")); r.Text != "registered-by-probe" {
		t.Fatalf("before: %q", r.Text)
	}
	// The command says it started, then runs until the test opens its
	// gate: the crash comes while the call is in flight, however slow the
	// machine.
	dir := t.TempDir()
	started, gate := filepath.Join(dir, "started"), filepath.Join(dir, "gate")
	done := make(chan *ToolResult, 1)
	go func() {
		done <- callTool(t, h, "agent", "bash", bashCall("touch "+started+"; until [ -e "+gate+" ]; do sleep 0.05; done; echo finished $DSH_PROJECT"))
	}()
	waitFile(t, started)
	pid := pidOf(h, "env")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := inFlight(t, done); r.Text != "finished demo" || r.IsError {
		t.Fatalf("the call in flight: %q", r.Text)
	}
	for i := 0; i < 3; i++ {
		if r := callTool(t, h, "agent", "bash", bashCall("echo next $DSH_PROJECT")); r.Text != "next demo" || r.IsError {
			t.Fatalf("call %d after the crash: %q", i, r.Text)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := callTool(t, h, "agent", "bash", bashCall("echo $DSH_PROBE"))
		if r.Text == "registered-by-probe" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe's fact was not registered again after the restart: %q; status %+v", r.Text, h.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func jobIDOf(t *testing.T, text string) string {
	t.Helper()
	for _, f := range strings.FieldsFunc(text, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') }) {
		if len(f) > 1 && f[0] == 'j' && strings.Trim(f[1:], "0123456789") == "" {
			return f
		}
	}
	t.Fatalf("no job id in %q", text)
	return ""
}

// waitFile waits until path exists: what a command makes to say it runs.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 30s", path)
		}
	}
}

// inFlight is the answer of a call a test made in another goroutine:
// callTool bounds the call itself, and this the wait for it (a callTool
// that failed in that goroutine never sends).
func inFlight(t *testing.T, done <-chan *ToolResult) *ToolResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(45 * time.Second):
		t.Fatal("the call in flight got no answer within 45s (callTool's own bound is 30s)")
		return nil
	}
}

// waitDead waits until pid has exited and was reaped: a call made from
// then on reaches no live process. (A call made while a killed process is
// still being torn down, its main thread a zombie and its other threads
// exiting, may still be sent to it and gets the "exited while the call was
// running" error.)
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still there 10s after SIGKILL", pid)
		}
	}
}

// A provider that takes a call and never answers (a stopped process the
// pulse is too slow to catch): the call ends at host.callTimeout with a
// sentence that says so, and the host keeps serving.
func TestCallDeadline(t *testing.T) {
	h := startTools(t, `
host:
  callTimeout: 2s
  pingInterval: 1h
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`)
	pid := pidOf(h, "bash")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	start := time.Now()
	r := callTool(t, h, "agent", "bash", bashCall("echo never"))
	if !r.IsError || !strings.Contains(r.Text, `plugin "bash" did not answer within the call deadline`) {
		t.Fatalf("a call to a stopped executor: %q", r.Text)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("answered after %v, before the deadline: the check is not what ended it", took)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := callTool(t, h, "agent", "bash", bashCall("echo back")); r.Text != "back" {
		t.Fatalf("after SIGCONT: %q", r.Text)
	}
}

// dsh reload of the tool plugin while a command runs: the call finishes on
// the old process, the tools stay listed, the next call runs on the new one.
func TestReloadOfToolPluginLetsCallsFinish(t *testing.T) {
	h, changed := startCountingListChanges(t, pulseYAML)
	old := pidOf(h, "tools")
	started := filepath.Join(t.TempDir(), "started")
	done := make(chan *ToolResult, 1)
	go func() { done <- callTool(t, h, "agent", "bash", bashCall("touch "+started+"; sleep 2; echo survived")) }()
	waitFile(t, started) // the call is in flight
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Reload(ctx, "tools"); err != nil {
		t.Fatal(err)
	}
	if n := len(h.Tools()); n != 4 {
		t.Fatalf("tools after the reload: %v", h.Tools())
	}
	if changed() {
		t.Error("the reload withdrew and listed the tools again (tools/list_changed)")
	}
	if r := inFlight(t, done); r.Text != "survived" || r.IsError {
		t.Fatalf("the call in flight across the reload: %q", r.Text)
	}
	if pidOf(h, "tools") == old {
		t.Fatal("still the old process")
	}
	if r := callTool(t, h, "agent", "bash", bashCall("echo new")); r.Text != "new" {
		t.Fatalf("after the reload: %q", r.Text)
	}
	deadline := time.Now().Add(20 * time.Second)
	for testplugins.Alive(old) {
		if time.Now().After(deadline) {
			t.Fatal("the old process was not stopped after its call ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startCountingListChanges starts a host on yaml; changed reports whether
// it told of a change of its tools (front ends send tools/list_changed)
// since changed was last called.
func startCountingListChanges(t *testing.T, yaml string) (h *Host, changed func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, yaml), testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	changes, stop := h.ToolChanges()
	t.Cleanup(stop)
	return h, func() bool {
		select {
		case <-changes:
			return true
		default:
			return false
		}
	}
}

// A call that comes while its provider restarts waits as long as the
// restart may take by its own bounds: here the new process's apply takes
// 6 s (a start on a loaded machine), longer than a fixed 5 s wait, and the
// call runs on it.
func TestCallWaitsForASlowRestart(t *testing.T) {
	slow := filepath.Join(t.TempDir(), "slow")
	h := startTools(t, fmt.Sprintf(`
plugins:
  - id: env
    name: shell-env
  - id: probe
    name: probe
    config: {slowApplyIf: %q, slowApplyMs: 6000}
`, slow))
	if w := h.restartWait(); w < 6*time.Second {
		t.Fatalf("calls wait %v for a restart, shorter than this test's apply", w)
	}
	pid := pidOf(h, "probe")
	if err := os.WriteFile(slow, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
	ctx, cancel := context.WithTimeout(context.Background(), h.restartWait()+10*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := probev1.NewProbeClient(h.Conn("probe")).Echo(ctx, &probev1.EchoRequest{Data: []byte("after")})
	if err != nil || string(resp.GetData()) != "after" {
		t.Fatalf("a call during a slow restart, after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	if took := time.Since(start); took < 5*time.Second {
		t.Fatalf("answered after %v: the restart was not slow", took)
	}
	if pidOf(h, "probe") == pid {
		t.Fatal("not restarted")
	}
}
