//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Exit codes, stdout and stderr apart, input, the working directory and
// the env layers reach the command in the pod.
func TestKubernetesRunsCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))

	got, isErr := s.bash(t, ctx, "echo out; echo err >&2; exit 3")
	if got != "out\n[stderr]\nerr\n[exit code: 3]" || !isErr {
		t.Fatalf("exit 3: %q (isError %v)", got, isErr)
	}
	got, isErr = s.bash(t, ctx, "true")
	if got != "" || isErr {
		t.Fatalf("true: %q (isError %v)", got, isErr)
	}
	// The pod's hostname is its name; bash runs it; the default working
	// directory is the container's; the model-friendly env is there.
	got, _ = s.bash(t, ctx, `echo "$HOSTNAME $0 $(pwd) $PAGER"`)
	if got != "web bash / cat" {
		t.Fatalf("the command's facts: %q", got)
	}
	got, _ = s.call(t, ctx, "bash", map[string]any{"command": "pwd; cd sub 2>/dev/null || echo nosub", "workdir": "/usr"})
	if got != "/usr\nnosub" {
		t.Fatalf("workdir: %q", got)
	}
	got, isErr = s.call(t, ctx, "bash", map[string]any{"command": "pwd", "workdir": "-P"})
	if !strings.Contains(got, "The working directory -P does not exist in the container") || !isErr {
		t.Fatalf("workdir -P: %q", got)
	}
	got, isErr = s.bash(t, ctx, "echo before\x00; echo after")
	if !strings.Contains(got, "The command holds a NUL character, which a shell cannot take.") || strings.Contains(got, "before") || !isErr {
		t.Fatalf("a NUL: %q (isError %v)", got, isErr)
	}
	got, isErr = s.call(t, ctx, "bash", map[string]any{"command": "pwd", "workdir": "/no/such/dir"})
	if !strings.Contains(got, "/no/such/dir does not exist in the container") || !isErr {
		t.Fatalf("a missing workdir: %q", got)
	}
}

// A command longer than Linux takes in one argument runs in the pod.
func TestKubernetesLongCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	got, isErr := s.bash(t, ctx, ": "+strings.Repeat("x", 300000)+"; echo ok")
	if got != "ok" || isErr {
		t.Fatalf("a long command: %q (isError %v)", got[:min(len(got), 300)], isErr)
	}
}

// What a command leaves behind when it exits dies with it: one holding
// its output (else the call would wait for it) and one that does not.
func TestKubernetesLeftBehindDies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	start := time.Now()
	// The scan inside the command shows both ran before it ended.
	got, isErr := s.bash(t, ctx, "sleep 4343 & setsid sleep 4343 >/dev/null 2>&1 & sleep 0.2; "+scanPod("sleep 4343")+"; echo ok")
	if strings.Count(got, "left: sleep 4343 \n") != 2 || !strings.HasSuffix(got, "scanned\nok") || isErr || time.Since(start) > 10*time.Second {
		t.Fatalf("after %v: %q (isError %v)", time.Since(start), got, isErr)
	}
	nothingLeft(t, ctx, s, "sleep 4343")
}

// A 100 MB flood comes back capped, the rest in the host's spill file,
// in bounded time.
func TestKubernetesFlood(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	start := time.Now()
	got, isErr := s.bash(t, ctx, "head -c 100000000 /dev/zero | tr '\\0' x; echo; echo done >&2")
	if isErr || !strings.Contains(got, "\n[stderr]\ndone\n[output truncated: ") || !strings.Contains(got, " of 100,000,001 bytes") {
		t.Fatalf("flood (%v): %q", time.Since(start), got[max(0, len(got)-600):])
	}
	t.Logf("100 MB in %v", time.Since(start))
	if len(got) > 200_000 {
		t.Fatalf("the result is %d bytes", len(got))
	}
}

// scanPod is a command listing the pod's processes whose command line
// holds marker (the scan's own does not: its pattern is split).
// A process that ends while the scan runs is passed over in silence.
func scanPod(marker string) string {
	return `for p in /proc/[0-9]*; do c=$({ tr '\0' ' ' <$p/cmdline; } 2>/dev/null); case "$c" in *"` + marker[:2] + `""` + marker[2:] + `"*) echo "left: $c";; esac; done; echo scanned`
}

// nothingLeft fails unless the pod has no process whose command line
// holds marker, within a few seconds.
func nothingLeft(t *testing.T, ctx context.Context, s *session, marker string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, _ = s.bash(t, ctx, scanPod(marker)); got == "scanned" {
			return
		}
	}
	t.Fatalf("left in the pod: %q", got)
}

// A timeout ends the command's whole tree in the pod, setsid children
// too, and the result says it timed out.
func TestKubernetesTimeoutKillsTheTree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	if got, _ := s.bash(t, ctx, scanPod("sleep 4242")); got != "scanned" {
		t.Fatalf("the scan before: %q", got)
	}
	start := time.Now()
	got, isErr := s.call(t, ctx, "bash", map[string]any{
		"command":   "setsid sleep 4242 & setsid sh -c 'trap \"\" TERM; sleep 4242' & sleep 4242 & echo started; wait",
		"timeoutMs": 1500,
	})
	took := time.Since(start)
	if !strings.HasPrefix(got, "started") || !strings.Contains(got, "timed out") || !isErr || took > 15*time.Second {
		t.Fatalf("timeout after %v: %q (isError %v)", took, got, isErr)
	}
	nothingLeft(t, ctx, s, "sleep 4242")
}

// Stopping a command sends it TERM once: its trap runs once. The stop is
// a job_kill once the trap is set (a timeout could come before it is).
func TestKubernetesStopTermsOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	started, _ := s.call(t, ctx, "bash", map[string]any{
		"command":           "trap 'echo got-term; sleep 0.3; exit 7' TERM; echo up; sleep 100",
		"run_in_background": true,
	})
	jid := regexp.MustCompile(`\bj[0-9]+\b`).FindString(started)
	var out string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out, "up"); time.Sleep(50 * time.Millisecond) {
		more, _ := s.call(t, ctx, "job_output", map[string]any{"job_id": jid})
		if time.Now().After(deadline) {
			t.Fatalf("the job's first output: %q (start: %q)", out, started)
		}
		out += more
	}
	if got, isErr := s.call(t, ctx, "job_kill", map[string]any{"job_id": jid}); isErr {
		t.Fatalf("job_kill: %q", got)
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out, "[job "+jid+" finished]"); time.Sleep(50 * time.Millisecond) {
		more, _ := s.call(t, ctx, "job_output", map[string]any{"job_id": jid})
		if time.Now().After(deadline) {
			t.Fatalf("the job's end: %q", out)
		}
		out += strings.ReplaceAll(more, "[job "+jid+" is still running]", "")
	}
	if strings.Count(out, "got-term") != 1 || !strings.Contains(out, "[exit code: 7]") {
		t.Fatalf("a trapped TERM: %q", out)
	}
}

// A cancelled call ends the command's tree in the pod; the next command
// runs.
func TestKubernetesCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	mark := filepath.Join(t.TempDir(), "started") // the pod sees this machine's files
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.cs.CallTool(cctx, mcpCall("bash", map[string]any{
			"command":     "setsid sleep 4343 & touch " + mark + "; sleep 4343",
			"description": "cancel",
		}))
		done <- err
	}()
	for !exists(mark) {
		if ctx.Err() != nil {
			t.Fatal("the command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ccancel()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the cancelled call did not return")
	}
	nothingLeft(t, ctx, s, "sleep 4343")
	if got, _ := s.bash(t, ctx, "echo next"); got != "next" {
		t.Fatalf("after the cancel: %q", got)
	}
}

// A background job is the host's: it is read before and after this
// executor reloads, and tells its end.
func TestKubernetesJobAcrossReload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	gate := filepath.Join(t.TempDir(), "gate")
	started, _ := s.call(t, ctx, "bash", map[string]any{
		"command":           "echo early; while [ ! -e " + gate + " ]; do sleep 0.05; done; echo late; exit 6",
		"run_in_background": true,
	})
	jid := regexp.MustCompile(`\bj[0-9]+\b`).FindString(started)
	var out string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out, "early"); time.Sleep(50 * time.Millisecond) {
		more, _ := s.call(t, ctx, "job_output", map[string]any{"job_id": jid})
		if time.Now().After(deadline) {
			t.Fatalf("the job's first output: %q (start: %q)", out, started)
		}
		out += more
	}
	before := s.executorPid(t)
	s.edit(t, strings.Replace(composition(srv, "web", ""), "graceMs: 1000", "graceMs: 1200", 1))
	if after := s.executorPid(t); after == before {
		t.Fatalf("the executor did not reload: pid %s before and after", after)
	}
	if got, _ := s.bash(t, ctx, "echo reloaded"); got != "reloaded" {
		t.Fatalf("after the reload: %q", got)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var rest string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(rest, "exit code: 6"); time.Sleep(50 * time.Millisecond) {
		more, _ := s.call(t, ctx, "job_output", map[string]any{"job_id": jid})
		if time.Now().After(deadline) {
			t.Fatalf("the job's end: %q", rest)
		}
		rest += strings.ReplaceAll(more, "[job "+jid+" is still running]", "")
	}
	if !strings.Contains(rest, "late\n[job "+jid+" finished]\n[exit code: 6]") {
		t.Fatalf("the job's output after the reload: %q", rest)
	}
}

// A pod deleted under a command is a fact in its result, in bounded time.
func TestKubernetesPodDeletedMidCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	mark := filepath.Join(t.TempDir(), "started")
	go func() {
		for !exists(mark) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		_ = srv.DeletePod("web")
	}()
	start := time.Now()
	got, isErr := s.bash(t, ctx, "echo started; touch "+mark+"; sleep 60")
	took := time.Since(start)
	if got != "started\n[stderr]\nThe pod default/web is gone (deleted), and the command with it.\n[exit code: 255]" || !isErr || took > 20*time.Second {
		t.Fatalf("after %v: %q (isError %v)", took, got, isErr)
	}
	got, isErr = s.bash(t, ctx, "echo after")
	if !isErr || !strings.Contains(got, "There is no pod web in namespace default.") {
		t.Fatalf("a command once the pod is gone: %q (isError %v)", got, isErr)
	}
}

// A stopped API server is said to be unreachable within the command's
// timeout, and the next command runs once it is back.
func TestKubernetesAPIServerStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	srv.Hang(true)
	start := time.Now()
	got, isErr := s.call(t, ctx, "bash", map[string]any{"command": "echo hi", "timeoutMs": 3000})
	took := time.Since(start)
	if !strings.Contains(got, "The Kubernetes API server at "+srv.URL+" cannot be reached.") || !isErr || took > 8*time.Second {
		t.Fatalf("after %v: %q (isError %v)", took, got, isErr)
	}
	srv.Hang(false)
	if got, isErr := s.bash(t, ctx, "echo back"); got != "back" || isErr {
		t.Fatalf("once the server is back: %q (isError %v)", got, isErr)
	}
}

// An account that may not exec reads one plain sentence.
func TestKubernetesForbidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	srv.Forbid("pods/exec")
	s := serve(t, ctx, composition(srv, "web", ""))
	got, isErr := s.bash(t, ctx, "echo hi")
	want := "Kubernetes does not allow this account to run commands in pod default/web: it needs permission to create pods/exec in namespace default."
	if got != "[stderr]\n"+want+"\n[exit code: 255]" || !isErr {
		t.Fatalf("forbidden: %q (isError %v)", got, isErr)
	}
}

// The cost of one `true` through the bash tool.
func TestKubernetesCostOfTrue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	s.bash(t, ctx, "true")
	const n = 20
	start := time.Now()
	for i := 0; i < n; i++ {
		if got, isErr := s.bash(t, ctx, "true"); got != "" || isErr {
			t.Fatalf("true: %q", got)
		}
	}
	t.Logf("one true through the bash tool: %v", time.Since(start)/n)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A relay killed outright (SIGKILL: it can do nothing) leaves nothing of
// its command in the pod: the watcher there sees the connection go.
func TestKubernetesRelayKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	mark := filepath.Join(t.TempDir(), "started")
	done := make(chan string, 1)
	go func() {
		// Not s.bash: a goroutine of its own may not end the test.
		r, err := s.cs.CallTool(ctx, mcpCall("bash", map[string]any{"command": "setsid sleep 4444 & sleep 4444 & touch " + mark + "; wait", "description": "relay killed"}))
		if err != nil {
			done <- "call failed: " + err.Error()
			return
		}
		var text []string
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		done <- strings.Join(text, "\n")
	}()
	for !exists(mark) {
		if ctx.Err() != nil {
			t.Fatal("the command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	relays := relayPids()
	if len(relays) != 1 {
		t.Fatalf("relays: %v", relays)
	}
	if err := syscall.Kill(relays[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if !strings.Contains(got, "SIGKILL") {
			t.Fatalf("the killed relay's result: %q", got)
		}
	case <-ctx.Done():
		t.Fatal("the call of the killed relay did not return")
	}
	nothingLeft(t, ctx, s, "sleep 4444")
}

// relayPids are the relays running on this machine from the test's
// binaries.
func relayPids() []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if string(cmdline) == filepath.Join(binDir, "dsh-bash-kubernetes")+"\x00relay\x00" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// With a label selector, commands run in a running pod it matches; a
// background job killed ends its tree in the pod.
func TestKubernetesSelectorAndJobKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startPod(t, "web-b")
	if _, err := srv.AddPod("other", map[string]string{"app": "other"}); err != nil {
		t.Fatal(err)
	}
	comp := strings.Replace(composition(srv, "x", ""), "pod: x", "labelSelector: app=web-b", 1)
	s := serve(t, ctx, comp)
	if got, _ := s.bash(t, ctx, "hostname"); got != "web-b" {
		t.Fatalf("the pod picked: %q", got)
	}
	started, _ := s.call(t, ctx, "bash", map[string]any{
		"command":           "setsid sleep 4646 & sleep 4646",
		"run_in_background": true,
	})
	jid := regexp.MustCompile(`\bj[0-9]+\b`).FindString(started)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, _ := s.bash(t, ctx, scanPod("sleep 4646"))
		if strings.Count(got, "left:") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job never started: %q (start: %q)", got, started)
		}
	}
	if got, isErr := s.call(t, ctx, "job_kill", map[string]any{"job_id": jid}); isErr {
		t.Fatalf("job_kill: %q", got)
	}
	nothingLeft(t, ctx, s, "sleep 4646")
}
