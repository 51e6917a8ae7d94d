//go:build unix

package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/internal/testplugins/probev1"
	"github.com/dshrun/dsh/plugins/shellenv"
)

// Faults where a crash restart meets another change of the same slot (a
// swap, a teardown), through the real binaries.

// livePlugins lists the live processes of dsh-<name> from the test binaries.
func livePlugins(name string) []int {
	var out []int
	for _, pid := range testplugins.Running(binDir) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if filepath.Base(strings.TrimSuffix(exe, " (deleted)")) == "dsh-"+name {
			out = append(out, pid)
		}
	}
	return out
}

// killAll kills what is left of dsh-<name> after a test that found it
// left behind, and gives go-plugin a moment to log its exit while the test
// can still take the line.
func killAll(t *testing.T, name string) {
	left := livePlugins(name)
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range left {
		for deadline := time.Now().Add(10 * time.Second); testplugins.Alive(pid) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(left) > 0 {
		time.Sleep(500 * time.Millisecond)
	}
}

// killAndWaitRestart kills id's process and waits until another one serves.
func killAndWaitRestart(t *testing.T, h *Host, id string) {
	t.Helper()
	pid := pidOf(h, id)
	if pid == 0 {
		t.Fatalf("%s has no process: %+v", id, h.Status())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, _ := stateOf(h, id); st == "active" && pidOf(h, id) != pid && pidOf(h, id) != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not restarted: %+v", id, h.Status())
		}
	}
}

// A consumer of a caller_state provider crashes and waits out a long
// backoff; meanwhile the provider crashes and comes back, and moves its
// consumers to new processes. The consumer's slot must end with one
// process: the swap and the in-place restart must not both put one in (the
// first would run on, unstopped, outside the slot, until the host dies).
func TestSwapOfARestartingConsumerLeavesOneProcess(t *testing.T) {
	// Registered first, so it runs after the host's Close and the check
	// for leftovers: what is left is killed so that later tests start clean.
	t.Cleanup(func() {
		killAll(t, "probe")
	})
	h := startHost(t, writeComp(t, pairYAML))
	// Three crashes: the fourth one waits 1.6 s before its restart.
	for i := 0; i < 3; i++ {
		killAndWaitRestart(t, h, "probe")
	}
	probe := pidOf(h, "probe")
	if err := syscall.Kill(probe, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, probe)
	killed := time.Now()
	// The provider's first crash restarts after 200 ms, well within the
	// probe's backoff.
	env := pidOf(h, "env")
	if err := syscall.Kill(env, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, env)
	// Past the probe's backoff and its restart, with a generous margin.
	time.Sleep(time.Until(killed.Add(4*backoffBase<<2 + 6*time.Second)))
	waitActive(t, h)
	var left []int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = livePlugins("probe"); len(left) == 1 {
			break
		}
	}
	if len(left) != 1 {
		t.Errorf("%d dsh-probe processes for one slot (the slot holds pid %d): %v", len(left), pidOf(h, "probe"), left)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := probev1.NewProbeClient(h.Conn("probe")).Collect(ctx, &probev1.CollectRequest{})
	if err != nil || resp.Env["DSH_PROBE"] != "from-probe" {
		t.Fatalf("after the restarts: %v %v", resp.GetEnv(), err)
	}
}

// host.callTimeout's default is meant to outlast the longest command the
// executor accepts (docs/operations.md: "the shell's maxTimeoutMs plus its grace plus
// 10 s"). An executor entry's own config overrides the settings namespace
// it reads, so a command it accepts must not be cut by the host first.
func TestCallTimeoutFollowsTheExecutorsOwnConfig(t *testing.T) {
	h := startTools(t, `
settings:
  shell:
    maxTimeoutMs: 1000
    graceMs: 200
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
    config:
      timeoutMs: 30000
      maxTimeoutMs: 60000
  - id: tools
    name: tool-bash
`)
	// The executor accepts 20 s; the settings alone would say 1 s (and a
	// call deadline of 11.2 s).
	r := callTool(t, h, "agent", "bash", bashCall("sleep 13; echo done", "timeoutMs", 20000))
	if r.IsError || r.Text != "done" {
		t.Fatalf("a 13 s command within the executor's 60 s cap: %q", r.Text)
	}
}

// Restarts that are not withdrawals send no tools/list_changed: a crash of
// the tool plugin, of its executor, and the swap of the tool plugin that a
// crash of shell-env (caller_state) causes. The tools stay listed, once.
func TestRestartsSendNoListChanged(t *testing.T) {
	h, changed := startCountingListChanges(t, pulseYAML)
	for _, id := range []string{"tools", "bash", "env"} {
		toolsPid := pidOf(h, "tools")
		killAndWaitRestart(t, h, id)
		if id == "env" {
			// tool-bash called shell-env: it moves to a new process.
			for deadline := time.Now().Add(30 * time.Second); pidOf(h, "tools") == toolsPid; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("tool-bash was not moved after shell-env restarted: %+v", h.Status())
				}
			}
		}
		waitActive(t, h)
		if r := callTool(t, h, "agent", "bash", bashCall("echo ok")); r.Text != "ok" {
			t.Fatalf("after a crash of %s: %q", id, r.Text)
		}
		if changed() {
			t.Errorf("a crash of %s sent tools/list_changed", id)
		}
		if names := h.Tools(); len(names) != 4 {
			t.Errorf("tools after a crash of %s: %v", id, names)
		}
	}
}

// A crash loop reached through in-place restarts ends FAILED: the
// executor's key is withdrawn and its dependent goes back to pending with
// the reason, but its tools stay listed (no tools/list_changed) and a call
// gets, at once, the sentence that says which plugin is down and how it
// comes back; `dsh reload` brings both back.
func TestCrashLoopKeepsToolsThenReloadRecovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, toolsYAML), testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	changes, stop := h.ToolChanges()
	defer stop()
	for i := 0; i < crashLimit-1; i++ {
		killAndWaitRestart(t, h, "bash")
	}
	pid := pidOf(h, "bash")
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, why := stateOf(h, "bash")
		tst, twhy := stateOf(h, "tools")
		if st == "failed" && strings.Contains(why, "crash loop") && tst == "pending" && strings.Contains(twhy, "shell") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d crashes: bash %s %q, tools %s %q", crashLimit, st, why, tst, twhy)
		}
	}
	if n := len(h.Tools()); n != 4 {
		t.Errorf("tools listed while their executor is down: %v", h.Tools())
	}
	select {
	case <-changes:
		t.Error("tools/list_changed while the tools stay listed")
	case <-time.After(time.Second):
	}
	begin := time.Now()
	_, err = h.CallTool(ctx, ToolCall{Owner: "agent", Tool: "bash", Arguments: []byte(`{"command":"true"}`)})
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Plugin != "bash" || !strings.Contains(err.Error(), `The bash tool is unavailable: it needs ctx.shell, whose plugin "bash" (`) ||
		!strings.Contains(err.Error(), "crash loop") || !strings.Contains(err.Error(), "dsh reload bash") {
		t.Errorf("a call while the executor is down: %v", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("the answer took %v: it waits for nothing", took)
	}
	if err := h.Reload(ctx, "bash"); err != nil {
		t.Fatal(err)
	}
	waitActive(t, h)
	if r := callTool(t, h, "agent", "bash", bashCall("echo back")); r.Text != "back" {
		t.Fatalf("after reload: %q", r.Text)
	}
}

// When shell-env (caller_state) restarts, a consumer that registered with
// it must register again. If its move to a new process fails (here its
// binary is gone), it must not stay active as if nothing was lost: either
// its fact is back or dsh status says it is not serving.
func TestFailedSwapDoesNotHideLostRegistrations(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "dsh-probe")
	b, err := os.ReadFile(filepath.Join(binDir, "dsh-probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	h := startHost(t, writeComp(t, `
plugins:
  - id: probe
    path: `+bin+`
    config:
      fact: from-probe
  - id: env
    name: shell-env
`))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := shellenv.NewClient(h.Conn(shellenv.Key))
	has := func() bool {
		facts, err := env.List(ctx)
		if err != nil {
			return false
		}
		for _, f := range facts {
			if f.Name == "DSH_PROBE" {
				return true
			}
		}
		return false
	}
	if !has() {
		t.Fatal("no DSH_PROBE before the crash")
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	killAndWaitRestart(t, h, "env")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, _ := stateOf(h, "probe")
		if has() || st != "active" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe is %s while what it registered with shell-env is lost: %+v", st, h.Status())
		}
	}
}

// crashIntoLongBackoff crashes id four times: its last restart waits 1.6 s.
func crashIntoLongBackoff(t *testing.T, h *Host, id string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		killAndWaitRestart(t, h, id)
	}
	pid := pidOf(h, id)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st, _ := stateOf(h, id); st == "restarting" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never restarting: %+v", id, h.Status())
		}
	}
}

// waitCount waits until exactly n processes of dsh-name are alive, past the
// point where a cancelled restart would have started one.
func waitCount(t *testing.T, name string, n int) {
	t.Helper()
	time.Sleep(backoffBase<<3 + 3*time.Second)
	var left []int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = livePlugins(name); len(left) == n {
			return
		}
	}
	t.Errorf("%d dsh-%s processes, want %d: %v", len(left), name, n, left)
}

// Teardowns that meet a restart waiting out its backoff: an edit that
// removes the entry, `dsh reload`, and Close. None leaves a process or a
// goroutine behind, none waits for the backoff's end.
func TestTeardownDuringARestart(t *testing.T) {
	twoProbes := `
plugins:
  - id: probe
    name: probe
    config:
      fact: from-probe
  - id: env
    name: shell-env
`
	t.Run("removed by an edit", func(t *testing.T) {
		t.Cleanup(func() { killAll(t, "probe") })
		h := startHost(t, writeComp(t, twoProbes))
		crashIntoLongBackoff(t, h, "probe")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.ApplyComposition(ctx, writeComp(t, "plugins:\n  - id: env\n    name: shell-env\n")); err != nil {
			t.Fatal(err)
		}
		waitCount(t, "probe", 0)
		if st, _ := stateOf(h, "probe"); st == "restarting" || st == "active" {
			t.Errorf("removed probe is %s", st)
		}
	})
	t.Run("reloaded", func(t *testing.T) {
		t.Cleanup(func() { killAll(t, "probe") })
		h := startHost(t, writeComp(t, twoProbes))
		crashIntoLongBackoff(t, h, "probe")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Reload(ctx, "probe"); err != nil {
			t.Fatal(err)
		}
		waitCount(t, "probe", 1)
		waitActive(t, h)
		resp, err := probev1.NewProbeClient(h.Conn("probe")).Collect(ctx, &probev1.CollectRequest{})
		if err != nil || resp.Env["DSH_PROBE"] != "from-probe" {
			t.Fatalf("after reload: %v %v", resp.GetEnv(), err)
		}
	})
	t.Run("host closed", func(t *testing.T) {
		t.Cleanup(func() { killAll(t, "probe"); killAll(t, "shell-env") })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h, err := Start(ctx, writeComp(t, twoProbes), testOptions(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		crashIntoLongBackoff(t, h, "env")
		start := time.Now()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("close took %v", took)
		}
		waitCount(t, "probe", 0)
		waitCount(t, "shell-env", 0)
	})
}

// `dsh reload` of a plugin that provides a key (make-before-break: a new
// scope takes the key, then the old one is disposed) and registered facts
// with shell-env: the old scope's release of its caller id must not drop
// what the new process, under the same id, has just registered.
func TestReloadOfAProviderKeepsWhatItRegistered(t *testing.T) {
	h := startHost(t, writeComp(t, pairYAML))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Reload(ctx, "probe"); err != nil {
		t.Fatal(err)
	}
	waitActive(t, h)
	resp, err := probev1.NewProbeClient(h.Conn("probe")).Collect(ctx, &probev1.CollectRequest{})
	if err != nil || resp.Env["DSH_PROBE"] != "from-probe" {
		t.Fatalf("after reload: %v %v", resp.GetEnv(), err)
	}
}
