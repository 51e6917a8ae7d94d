//go:build unix

package reliability

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// Faults of plugin processes, through dsh serve: kill -9 and SIGSTOP of the
// executor, the tool plugin and shell-env, between calls and during them.

// A quick pulse, so a hung plugin is found within seconds (three misses of
// pulseEvery each), with each ask's timeout long enough that a healthy
// plugin on a loaded machine answers it: a shorter one kills plugins that
// are only slow, and fails whatever calls they hold.
const pulseComp = `
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
`

// pulseEvery is pulseComp's pingInterval plus its pingTimeout: the most one
// missed health check takes.
const pulseEvery = 200*time.Millisecond + 2*time.Second

// pluginPid is the pid of the one live process of dsh-<name>.
func pluginPid(t *testing.T, name string) int {
	t.Helper()
	exe := filepath.Join(binDir, "dsh-"+name)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, pid := range testplugins.Running(binDir) {
			if got, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); got == exe {
				return pid
			}
		}
	}
	t.Fatalf("no live dsh-%s", name)
	return 0
}

// killed sends sig to pid and, for SIGKILL, waits until it is reaped.
func killed(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); sig == syscall.SIGKILL; time.Sleep(time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still there after SIGKILL", pid)
		}
	}
}

func TestPluginCrashesBetweenCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	s := startServe(t, ctx, pulseComp)
	s.commandsRun(t, ctx, 1)
	for _, name := range []string{"bash-local", "tool-bash", "shell-env"} {
		f := fault(t, "kill -9 of "+name+" between calls")
		pid := pluginPid(t, name)
		killed(t, pid, syscall.SIGKILL)
		got, isErr := s.bash(t, ctx, map[string]any{"command": "echo right after $DSH_PROJECT"})
		if got != "right after demo" || isErr {
			t.Fatalf("the call right after kill -9 of %s: %q", name, got)
		}
		f.Saw("the next call waited for the restart and ran")
		s.commandsRun(t, ctx, 20)
		if pluginPid(t, name) == pid {
			t.Fatalf("%s was not restarted", name)
		}
		f.Saw("restarted; 20 later commands exit 0")
	}
}

func TestPluginFaultsDuringACall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	s := startServe(t, ctx, pulseComp)
	// The job runs until the test opens its gate: across both faults.
	gate := filepath.Join(t.TempDir(), "gate")
	job, _ := s.bash(t, ctx, map[string]any{"command": "until [ -e " + gate + " ]; do sleep 0.05; done; echo job-survived", "run_in_background": true})
	jid := jobID(job)

	f := fault(t, "kill -9 of shell-env during a call")
	done := make(chan string, 1)
	go func() {
		got, _ := s.bash(t, ctx, map[string]any{"command": "sleep 1; echo finished $DSH_PROJECT"})
		done <- got
	}()
	time.Sleep(300 * time.Millisecond)
	killed(t, pluginPid(t, "shell-env"), syscall.SIGKILL)
	if got := receive(t, ctx, done, "the call in flight"); got != "finished demo" {
		t.Fatalf("the call in flight: %q", got)
	}
	f.Saw("the call in flight finished: %q", "finished demo")
	s.commandsRun(t, ctx, 20)
	f.Saw("20 later commands exit 0")

	f = fault(t, "SIGSTOP of bash-local during a call (timeoutMs 60000)")
	// A sleep only this test runs: other packages' tests sleep too.
	sleep := "sleep " + marker(300000)
	go func() {
		got, _ := s.bash(t, ctx, map[string]any{"command": sleep, "timeoutMs": 60000})
		done <- got
	}()
	for deadline := time.Now().Add(20 * time.Second); len(testplugins.Matching(sleep)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	pid := pluginPid(t, "bash-local")
	killed(t, pid, syscall.SIGSTOP)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	start := time.Now()
	var got string
	// The pulse finds it within its three misses; then the kill, its
	// reaping and the answer's way back.
	within := 3*pulseEvery + 20*time.Second
	select {
	case got = <-done:
	case <-time.After(within):
		t.Fatalf("no answer %v after the executor stopped", within)
	}
	if !strings.Contains(got, "stopped answering its health checks") || strings.Contains(got, "rpc error") {
		t.Fatalf("the call on the stopped executor: %q", got)
	}
	f.Saw("answered after %.1fs: %q", time.Since(start).Seconds(), got)
	if left := testplugins.Matching(sleep); len(left) > 0 {
		for deadline := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			left = testplugins.Matching(sleep)
		}
		if len(left) > 0 {
			t.Fatalf("the foreground tree outlived the executor: %v", left)
		}
	}
	f.Saw("its tree is gone")
	s.commandsRun(t, ctx, 20)
	f.Saw("restarted; 20 later commands exit 0")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := s.call(ctx, "job_output", map[string]any{"job_id": jid})
	for deadline := time.Now().Add(20 * time.Second); err == nil && !strings.Contains(out, "finished") && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var more string
		more, err = s.call(ctx, "job_output", map[string]any{"job_id": jid})
		out += more
	}
	if err != nil || !strings.Contains(out, "job-survived") {
		t.Fatalf("the background job started before the faults: %q %v", out, err)
	}
	f.Saw("a background job started before both faults finished with its output")
}
