//go:build linux

package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// A background job in the pod ends when the host stops: its relay is the
// host's process, and the command in the pod goes with it (setsid
// children too).
func TestKubernetesJobEndsWithTheHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	started, _ := s.call(t, ctx, "bash", map[string]any{
		"command":           "setsid sleep 4747 & sleep 4747",
		"run_in_background": true,
	})
	if regexp.MustCompile(`\bj[0-9]+\b`).FindString(started) == "" {
		t.Fatalf("start: %q", started)
	}
	for deadline := time.Now().Add(15 * time.Second); len(testplugins.Matching("sleep 4747")) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job never ran in the pod (start: %q)", started)
		}
	}
	// The client goes: dsh serve on stdio stops.
	if err := s.cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	for deadline := time.Now().Add(20 * time.Second); len(testplugins.Matching("sleep 4747")) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("left in the pod after the host stopped: %v", testplugins.Matching("sleep 4747"))
		}
	}
}

// What reaches the pod's command of the environment: the DSH_* facts of
// ctx.shellEnv and the executor's overrides, never this machine's
// variables, credentials least of all.
func TestKubernetesEnvironmentSent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-of-the-host")
	t.Setenv("PLAIN_TEST_HOST_VAR", "of-the-host")
	s := serve(t, ctx, strings.Replace(composition(srv, "web", ""), "    name: shell-env\n",
		"    name: shell-env\n    config:\n      facts:\n        DSH_PROJECT: kube-env\n", 1))
	got, _ := s.bash(t, ctx, `echo "[${AWS_SECRET_ACCESS_KEY-unset}|${PLAIN_TEST_HOST_VAR-unset}|${DSH_PROJECT-unset}|$NO_COLOR]"; env | grep -c s3cr3t || true`)
	if got != "[unset|unset|kube-env|1]\n0" {
		t.Fatalf("the environment in the pod: %q", got)
	}
}

// A crash of the executor (kill -9) mid-session: the host restarts it, a
// background job started before is still read through the new one, and
// the next command runs.
func TestKubernetesExecutorCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	started, _ := s.call(t, ctx, "bash", map[string]any{
		"command":           "echo early; sleep 4848",
		"run_in_background": true,
	})
	jid := regexp.MustCompile(`\bj[0-9]+\b`).FindString(started)
	if jid == "" {
		t.Fatalf("start: %q", started)
	}
	pid, err := strconv.Atoi(s.executorPid(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var got string
	for deadline := time.Now().Add(30 * time.Second); got != "after the crash"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the executor's crash: %q", got)
		}
		got, _ = s.bash(t, ctx, "echo after the crash")
	}
	var out string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out, "early"); time.Sleep(50 * time.Millisecond) {
		more, _ := s.call(t, ctx, "job_output", map[string]any{"job_id": jid})
		if time.Now().After(deadline) {
			t.Fatalf("job_output after the crash: %q", out)
		}
		out += more
	}
	if got, isErr := s.call(t, ctx, "job_kill", map[string]any{"job_id": jid}); isErr {
		t.Fatalf("job_kill after the crash: %q", got)
	}
	for deadline := time.Now().Add(20 * time.Second); len(testplugins.Matching("sleep 4848")) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job is left in the pod after job_kill: %v", testplugins.Matching("sleep 4848"))
		}
	}
}
