//go:build unix

package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/plugins/shell"
)

// These tests drive the real dsh-bash-local binary through the host: the
// executor is its own process, and it spawns through the host's
// ctx.subprocess.

const bashYAML = `
settings:
  shell:
    timeoutMs: 20000
    graceMs: 200
plugins:
  - id: bash
    name: bash-local
    config:
      maxOutputBytes: 1000
`

func startShell(t *testing.T) (*Host, *shell.Client) {
	t.Helper()
	h := startHost(t, writeComp(t, bashYAML))
	return h, shell.NewClient(h.Conn(shell.Key), "")
}

func run(t *testing.T, sh *shell.Client, req *shell.ExecRequest) *shell.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec, err := sh.Resolve(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sh.Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestBashLocalResolve(t *testing.T) {
	_, sh := startShell(t)
	ctx := context.Background()
	spec, err := sh.Resolve(ctx, &shell.ExecRequest{Command: "true", TimeoutMs: 999_999_999, Workdir: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if spec.TimeoutMs != 600_000 || spec.GraceMs != 200 || spec.MaxOutputBytes != 1000 || spec.MaxSpillBytes != 64<<20 || spec.Workdir != wd+"/sub" {
		t.Fatalf("spec: %+v", spec)
	}
	spec, _ = sh.Resolve(ctx, &shell.ExecRequest{Command: "true"})
	if spec.TimeoutMs != 20000 || spec.Owner != "host" {
		t.Fatalf("defaults: %+v", spec)
	}
	if _, err := sh.Resolve(ctx, &shell.ExecRequest{Command: "  "}); !errors.Is(err, shell.ErrInvalid) || err.Error() != "There is no command to run: the command is empty." {
		t.Fatalf("empty command: %v", err)
	}
}

// A workdir of ~ or ~/x is under the home directory the command's own
// $HOME names, as bash would take it; ~name under that user's.
func TestBashLocalHomeWorkdir(t *testing.T) {
	home := t.TempDir()
	if err := os.Mkdir(home+"/src", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home) // the host's, so the executor's and the command's
	_, sh := startShell(t)
	for _, wd := range []string{"~", "~/src"} {
		r := run(t, sh, &shell.ExecRequest{Command: `pwd; echo "$HOME"`, Workdir: wd})
		want := strings.Replace(wd, "~", home, 1) + "\n" + home + "\n"
		if string(r.Stdout.GetData()) != want || r.Workdir != strings.Replace(wd, "~", home, 1) {
			t.Errorf("workdir %s: ran in %q (workdir %s), want %q", wd, r.Stdout.GetData(), r.Workdir, want)
		}
	}
	if root, err := user.Lookup("root"); err == nil {
		r := run(t, sh, &shell.ExecRequest{Command: "pwd", Workdir: "~root"})
		if string(r.Stdout.GetData()) != root.HomeDir+"\n" {
			t.Errorf("~root: ran in %q, want %s", r.Stdout.GetData(), root.HomeDir)
		}
	}
	_, err := sh.Resolve(context.Background(), &shell.ExecRequest{Command: "pwd", Workdir: "~no-such-user-here"})
	if want := "The working directory ~no-such-user-here starts with ~no-such-user-here, the home directory of user no-such-user-here, and there is no such user here."; !errors.Is(err, shell.ErrInvalid) || err.Error() != want {
		t.Fatalf("unknown user: %v, want %q", err, want)
	}
}

func TestBashLocalRun(t *testing.T) {
	_, sh := startShell(t)
	r := run(t, sh, &shell.ExecRequest{Command: "echo out; echo err >&2; exit 3"})
	if r.ExitCode == nil || *r.ExitCode != 3 || string(r.Stdout.Data) != "out\n" || string(r.Stderr.Data) != "err\n" || r.TimedOut || r.Aborted {
		t.Fatalf("exit 3: %+v", r)
	}
	r = run(t, sh, &shell.ExecRequest{Command: "kill -KILL $$"})
	if r.ExitCode != nil || r.Signal != "SIGKILL" {
		t.Fatalf("signal: %+v", r)
	}
	// The model-friendly environment, under the caller's env, under the
	// trusted snapshot.
	r = run(t, sh, &shell.ExecRequest{
		Command: `echo "$TERM $PAGER $NO_COLOR $GIT_PAGER $X $DSH_HOME"`,
		Env:     map[string]string{"X": "caller", "PAGER": "less", "DSH_HOME": "forged"},
		DshEnv:  map[string]string{"DSH_HOME": "/trusted"},
	})
	if got := string(r.Stdout.Data); got != "dumb less 1 cat caller /trusted\n" {
		t.Fatalf("env: %q", got)
	}
	// Long output: the tail in memory, the whole in the spill file.
	r = run(t, sh, &shell.ExecRequest{Command: "seq 1 100000"})
	if !r.Stdout.Truncated || len(r.Stdout.Data) > 1000 || !strings.HasSuffix(string(r.Stdout.Data), "99999\n100000\n") {
		t.Fatalf("truncation: %d bytes, %+v", len(r.Stdout.Data), r.Stdout.Truncated)
	}
	b, err := os.ReadFile(r.Stdout.SpillPath)
	if err != nil || int64(len(b)) != r.Stdout.Total || !strings.HasPrefix(string(b), "1\n2\n3\n") {
		t.Fatalf("spill: %d bytes of %d, %v", len(b), r.Stdout.Total, err)
	}
}

// A timeout kills the whole tree, setsid and double-forked children too.
func TestBashLocalTimeoutLeavesNothing(t *testing.T) {
	_, sh := startShell(t)
	marker := strconv.Itoa(700000 + os.Getpid()%99999)
	r := run(t, sh, &shell.ExecRequest{
		Command:   fmt.Sprintf("sleep %s & setsid sleep %s & (setsid sleep %s &); sleep %s", marker, marker, marker, marker),
		TimeoutMs: 300,
	})
	if !r.TimedOut || r.Aborted || r.Signal == "" || r.TimeoutMs != 300 {
		t.Fatalf("result: %+v", r)
	}
	if left := testplugins.Matching("sleep " + marker); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// Cancelling the call aborts the command; the result says so.
func TestBashLocalAbort(t *testing.T) {
	_, sh := startShell(t)
	marker := strconv.Itoa(600000 + os.Getpid()%99999)
	ctx, cancel := context.WithCancel(context.Background())
	spec, err := sh.Resolve(ctx, &shell.ExecRequest{Command: "sleep " + marker})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := sh.Run(ctx, spec); done <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for len(testplugins.Matching("sleep "+marker)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := bounded.Receive(t, done, "the call's end"); status.Code(err) != codes.Canceled && err != context.Canceled && !strings.Contains(fmt.Sprint(err), "canceled") {
		t.Fatalf("run: %v", err)
	}
	if left := waitGone("sleep "+marker, deadline); len(left) > 0 {
		t.Fatalf("aborted command still running: %v", left)
	}
	// A call already cancelled is refused without running anything.
	if _, err := sh.Run(ctx, spec); err == nil {
		t.Fatal("run with a cancelled context succeeded")
	}
}

// waitGone waits until no process matches marker, and returns those left
// at the deadline. Gone means absent several times in a row: a process in
// the middle of exec (bash exec-ing sleep) briefly shows an empty command
// line.
func waitGone(marker string, deadline time.Time) []string {
	for absent := 0; absent < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if len(testplugins.Matching(marker)) == 0 {
			absent++
		} else {
			absent = 0
		}
	}
	return testplugins.Matching(marker)
}

func TestBashLocalInfrastructureFailures(t *testing.T) {
	_, sh := startShell(t)
	ctx := context.Background()
	spec, _ := sh.Resolve(ctx, &shell.ExecRequest{Command: "true", Workdir: "/nonexistent/place"})
	if _, err := sh.Run(ctx, spec); !errors.Is(err, shell.ErrCannotRun) || !strings.Contains(err.Error(), "/nonexistent/place") {
		t.Fatalf("bad workdir: %v", err)
	}
	// start never fails for the command: the failure settles as killed.
	p, err := sh.StartProcess(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Status != shell.StatusKilled {
		t.Fatalf("settled: %+v %v", st, err)
	}
	rd, _ := p.ReadOutput(ctx)
	if !strings.Contains(string(rd.Stderr), "/nonexistent/place") {
		t.Fatalf("stderr: %q", rd.Stderr)
	}
}

func TestBashLocalBackground(t *testing.T) {
	h, sh := startShell(t)
	ctx := context.Background()
	// The command waits for a file the test makes only after the start
	// returned and a read saw it running: the start did not wait for it,
	// and reads hand out output while the process runs, however slow the
	// machine.
	gate := filepath.Join(t.TempDir(), "go")
	spec, _ := sh.Resolve(ctx, &shell.ExecRequest{Command: "echo l1; while [ ! -e " + gate + " ]; do sleep 0.01; done; for i in $(seq 2 15); do echo l$i; sleep 0.03; done; echo e >&2", TimeoutMs: 1})
	startCtx, started := context.WithTimeout(ctx, 20*time.Second)
	p, err := sh.StartProcess(startCtx, spec)
	started()
	if err != nil {
		t.Fatalf("the start did not return while the command waits: %v", err)
	}
	var out, errOut strings.Builder
	for deadline := time.Now().Add(20 * time.Second); out.String() != "l1\n"; time.Sleep(20 * time.Millisecond) {
		rd, err := p.ReadOutput(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rd.State.Status != shell.StatusRunning || time.Now().After(deadline) {
			t.Fatalf("before the gate: %+v, read %q", rd.State, out.String()+string(rd.Stdout))
		}
		out.Write(rd.Stdout)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("not ended within 30s; read %q", out.String())
		}
		rd, err := p.ReadOutput(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rd.Lossy {
			t.Fatalf("lossy: %+v", rd)
		}
		out.Write(rd.Stdout)
		errOut.Write(rd.Stderr)
		if rd.State.Status != shell.StatusRunning {
			break
		}
		time.Sleep(40 * time.Millisecond)
	}
	var want strings.Builder
	for i := 1; i <= 15; i++ {
		fmt.Fprintf(&want, "l%d\n", i)
	}
	// The timeout does not apply in the background (1 ms would have killed it).
	if out.String() != want.String() || errOut.String() != "e\n" {
		t.Fatalf("read %q %q", out.String(), errOut.String())
	}
	if killed, _ := p.Kill(ctx); killed {
		t.Fatal("kill of a finished process returned true")
	}

	// A background process survives its executor's reload and stays
	// readable through the new one.
	spec, _ = sh.Resolve(ctx, &shell.ExecRequest{Command: "echo before; sleep 1; echo after"})
	p, err = sh.StartProcess(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := h.Registry().Scope("bash")
	oldPid := h.find("bash").current().proc.Pid()
	s.Restart()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := h.Registry().Settled(sctx); err != nil {
		t.Fatal(err)
	}
	if newPid := h.find("bash").current().proc.Pid(); newPid == oldPid {
		t.Fatal("executor was not restarted")
	}
	again := shell.NewClient(h.Conn(shell.Key), "").Attach(p.ID)
	if _, err := again.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	rd, err := again.ReadOutput(ctx)
	if err != nil || string(rd.Stdout) != "before\nafter\n" || rd.State.Status != shell.StatusCompleted {
		t.Fatalf("after reload: %q %+v %v", rd.GetStdout(), rd.GetState(), err)
	}
	// Kill works on a running one.
	spec, _ = sh.Resolve(ctx, &shell.ExecRequest{Command: "sleep 30"})
	p, _ = sh.StartProcess(ctx, spec)
	if killed, err := p.Kill(ctx); !killed || err != nil {
		t.Fatalf("kill: %v %v", killed, err)
	}
	st, _ := p.Wait(ctx)
	if st.Status != shell.StatusKilled || st.Signal != "SIGTERM" {
		t.Fatalf("killed: %+v", st)
	}
}

// A foreground command whose executor crashes dies with its whole tree,
// and the caller gets a clear error instead of a hang.
func TestBashLocalExecutorCrashKillsForeground(t *testing.T) {
	h, sh := startShell(t)
	marker := strconv.Itoa(500000 + os.Getpid()%99999)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec, _ := sh.Resolve(ctx, &shell.ExecRequest{Command: fmt.Sprintf("setsid sleep %s & sleep %s", marker, marker)})
	done := make(chan error, 1)
	go func() { _, err := sh.Run(ctx, spec); done <- err }()
	for len(testplugins.Matching("sleep "+marker)) < 3 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	pid := h.find("bash").current().proc.Pid()
	if err := syscallKill(pid); err != nil {
		t.Fatal(err)
	}
	err := bounded.Receive(t, done, "the call's end")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `plugin "bash"`) || !strings.Contains(err.Error(), "exited while the call was running") {
		t.Fatalf("run after the executor crashed: %v", err)
	}
	dl, _ := ctx.Deadline()
	if left := waitGone("sleep "+marker, dl); len(left) > 0 {
		t.Fatalf("foreground tree outlived its executor: %v", left)
	}
}

// Output crosses the plugin boundary as bytes.
func TestBashLocalBytes(t *testing.T) {
	_, sh := startShell(t)
	r := run(t, sh, &shell.ExecRequest{Command: `printf 'a\xffb'`})
	if !bytes.Equal(r.Stdout.Data, []byte{'a', 0xff, 'b'}) {
		t.Fatalf("%q", r.Stdout.Data)
	}
}

// Exec is Resolve then Run in one round trip to the executor: same
// defaults, caps, results and errors.
func TestBashLocalExec(t *testing.T) {
	_, sh := startShell(t)
	ctx := context.Background()
	wd, _ := os.Getwd()
	r, err := sh.Exec(ctx, &shell.ExecRequest{Command: "echo hi; exit 4", TimeoutMs: 999_999_999, Workdir: "."})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode == nil || *r.ExitCode != 4 || string(r.Stdout.Data) != "hi\n" || r.TimeoutMs != 600_000 || r.Workdir != wd {
		t.Fatalf("exec: %+v", r)
	}
	if _, err := sh.Exec(ctx, &shell.ExecRequest{Command: " "}); !errors.Is(err, shell.ErrInvalid) {
		t.Fatalf("empty command: %v", err)
	}
	if _, err := sh.Exec(ctx, &shell.ExecRequest{Command: "true", Workdir: "/nonexistent/place"}); !errors.Is(err, shell.ErrCannotRun) {
		t.Fatalf("bad workdir: %v", err)
	}
	r, err = sh.Exec(ctx, &shell.ExecRequest{Command: "sleep 5", TimeoutMs: 200})
	if err != nil || !r.TimedOut {
		t.Fatalf("timeout: %+v %v", r, err)
	}
}

// The executor's limits are facts it says itself (the settings with its
// entry's config over them, defaulted), through the real binary; the host
// bounds its calls and its stop by them, reading no plugin's config.
func TestBashLocalLimits(t *testing.T) {
	h, sh := startShell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lim, err := sh.Limits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if lim.Workdir != wd || lim.TimeoutMs != 20000 || lim.MaxTimeoutMs != 600_000 || lim.GraceMs != 200 || lim.MaxOutputBytes != 1000 || lim.MaxSpillBytes != 64<<20 {
		t.Fatalf("limits: %+v", lim)
	}
	// What Resolve applies is what Limits says.
	spec, err := sh.Resolve(ctx, &shell.ExecRequest{Command: "true"})
	if err != nil || spec.Workdir != lim.Workdir || spec.TimeoutMs != lim.TimeoutMs || spec.GraceMs != lim.GraceMs || spec.MaxOutputBytes != lim.MaxOutputBytes {
		t.Fatalf("resolved %+v %v, limits %+v", spec, err, lim)
	}
	if got, want := h.callTimeout(), 600_200*time.Millisecond+10*time.Second; got != want {
		t.Errorf("call deadline %v, want the executor's maxTimeoutMs + graceMs + 10s = %v", got, want)
	}
	if got, want := h.ShutdownBound(), h.stopTimeout()+200*time.Millisecond; got != want {
		t.Errorf("shutdown bound %v, want the stop timeout + the executor's grace = %v", got, want)
	}
}

// A reloaded executor brings its new limits: the host's call deadline
// follows its new maxTimeoutMs, and a restart in place keeps them.
func TestTimeoutFollowsExecutorReload(t *testing.T) {
	h, sh := startShell(t)
	if got, want := h.callTimeout(), 600_200*time.Millisecond+10*time.Second; got != want {
		t.Fatalf("call deadline %v, want %v", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := writeComp(t, strings.Replace(bashYAML, "maxOutputBytes: 1000", "maxOutputBytes: 1000\n      maxTimeoutMs: 30000\n      graceMs: 500", 1))
	bashPid := pidOf(h, "bash")
	if err := h.ApplyComposition(ctx, next); err != nil {
		t.Fatal(err)
	}
	if pidOf(h, "bash") == bashPid {
		t.Fatal("the executor was not reloaded")
	}
	want := 30_500*time.Millisecond + 10*time.Second
	if got := h.callTimeout(); got != want {
		t.Fatalf("call deadline after the reload %v, want %v", got, want)
	}
	if lim, err := sh.Limits(ctx); err != nil || lim.MaxTimeoutMs != 30000 || lim.GraceMs != 500 {
		t.Fatalf("limits after the reload: %+v %v", lim, err)
	}
	killAndWaitRestart(t, h, "bash")
	if got := h.callTimeout(); got != want {
		t.Fatalf("call deadline after a restart in place %v, want %v", got, want)
	}
}
