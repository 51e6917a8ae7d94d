package localexec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/procs/procstest"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
	"github.com/dshrun/dsh/sdk"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(procs.SpawnerGoroutine))
}

func bashArgv(spec *shell.ExecSpec) []string { return []string{"bash", "-c", spec.Command} }

func TestParseConfigDefaults(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Cwd: wd, TimeoutMs: 120_000, MaxTimeoutMs: 600_000, MaxOutputBytes: 64_000, MaxSpillBytes: 64 << 20, GraceMs: 3_000}
	if c != want {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	// Zero and negative numbers mean the defaults too.
	c, err = ParseConfig(json.RawMessage(`{"timeoutMs":0,"maxTimeoutMs":-5,"maxOutputBytes":-1,"maxSpillBytes":0,"graceMs":-1}`))
	if err != nil || c != want {
		t.Fatalf("zeros: %+v %v, want %+v", c, err, want)
	}
	// A relative cwd is taken from the working directory.
	c, err = ParseConfig(json.RawMessage(`{"cwd":"sub/dir","timeoutMs":5,"maxTimeoutMs":5,"maxOutputBytes":7,"maxSpillBytes":9,"graceMs":11}`))
	want = Config{Cwd: filepath.Join(wd, "sub", "dir"), TimeoutMs: 5, MaxTimeoutMs: 5, MaxOutputBytes: 7, MaxSpillBytes: 9, GraceMs: 11}
	if err != nil || c != want {
		t.Fatalf("explicit: %+v %v, want %+v", c, err, want)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`{"cwd":"/","shell":"zsh"}`, `unknown field "shell"`},
		{`{"timeoutMs":"1s"}`, "timeoutMs"},
		{`{"timeoutMs":700000}`, "timeoutMs 700000 is above maxTimeoutMs 600000"},
		{`{"timeoutMs":2000,"maxTimeoutMs":1000}`, "timeoutMs 2000 is above maxTimeoutMs 1000"},
		{`[]`, "config"},
	} {
		_, err := ParseConfig(json.RawMessage(c.raw))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("ParseConfig(%s) = %v, want an error with %q", c.raw, err, c.want)
		}
	}
}

func testConfig() Config {
	return Config{Cwd: "/work/space", TimeoutMs: 1000, MaxTimeoutMs: 5000, MaxOutputBytes: 100, MaxSpillBytes: 777, GraceMs: 42}
}

func TestResolveDefaultsAndCaps(t *testing.T) {
	e := &Executor{Cfg: testConfig(), Argv: bashArgv}
	ctx := context.Background()
	cases := []struct {
		name    string
		req     *shell.ExecRequest
		workdir string
		timeout int64
		maxOut  int64
	}{
		{"defaults", &shell.ExecRequest{Command: "x"}, "/work/space", 1000, 100},
		{"relative workdir", &shell.ExecRequest{Command: "x", Workdir: "a/../b"}, "/work/space/b", 1000, 100},
		{"absolute workdir", &shell.ExecRequest{Command: "x", Workdir: "/tmp/./q/"}, "/tmp/q", 1000, 100},
		{"below the caps", &shell.ExecRequest{Command: "x", TimeoutMs: 10, MaxOutputBytes: 5}, "/work/space", 10, 5},
		{"at the caps", &shell.ExecRequest{Command: "x", TimeoutMs: 5000, MaxOutputBytes: 100}, "/work/space", 5000, 100},
		{"above the caps", &shell.ExecRequest{Command: "x", TimeoutMs: 5001, MaxOutputBytes: 101}, "/work/space", 5000, 100},
		{"negative", &shell.ExecRequest{Command: "x", TimeoutMs: -1, MaxOutputBytes: -1}, "/work/space", 1000, 100},
	}
	for _, c := range cases {
		s, err := shell.NewServer(e).Resolve(ctx, c.req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Workdir != c.workdir || s.TimeoutMs != c.timeout || s.MaxOutputBytes != c.maxOut || s.MaxSpillBytes != 777 || s.GraceMs != 42 {
			t.Errorf("%s: %+v, want workdir %s timeout %d maxOut %d (spill 777, grace 42)", c.name, s, c.workdir, c.timeout, c.maxOut)
		}
	}

	// Everything else passes through as given.
	req := &shell.ExecRequest{
		Command: "echo hi", Stdin: []byte("in"), HasStdin: true,
		Env: map[string]string{"A": "1"}, DshEnv: map[string]string{"DSH_X": "2"},
		Owner: "agent", SandboxPolicy: &shellv1.SandboxPolicy{Mode: string(shell.ReadOnly)},
	}
	s, err := shell.NewServer(e).Resolve(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if s.Command != "echo hi" || string(s.Stdin) != "in" || !s.HasStdin || s.Env["A"] != "1" || s.DshEnv["DSH_X"] != "2" || s.Owner != "agent" || s.SandboxPolicy.GetMode() != "read-only" {
		t.Fatalf("pass-through: %+v", s)
	}
}

func TestResolveOwner(t *testing.T) {
	e := &Executor{Cfg: testConfig(), Argv: bashArgv}
	// The host names the calling plugin in the call's metadata.
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(sdk.MetaCaller, "tools"))
	if s, err := shell.NewServer(e).Resolve(ctx, &shell.ExecRequest{Command: "x"}); err != nil || s.Owner != "tools" {
		t.Fatalf("owner from the caller: %q %v", s.GetOwner(), err)
	}
	if s, err := shell.NewServer(e).Resolve(ctx, &shell.ExecRequest{Command: "x", Owner: "agent"}); err != nil || s.Owner != "agent" {
		t.Fatalf("an explicit owner: %q %v", s.GetOwner(), err)
	}
	if s, err := shell.NewServer(e).Resolve(context.Background(), &shell.ExecRequest{Command: "x"}); err != nil || s.Owner != "" {
		t.Fatalf("no caller: %q %v", s.GetOwner(), err)
	}
}

func TestResolveRefusesEmptyCommands(t *testing.T) {
	e := &Executor{Cfg: testConfig(), Argv: bashArgv}
	for _, cmd := range []string{"", " ", "\n\t "} {
		_, err := shell.NewServer(e).Resolve(context.Background(), &shell.ExecRequest{Command: cmd})
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "There is no command to run: the command is empty." {
			t.Errorf("command %q: %v, want InvalidArgument", cmd, err)
		}
		// Exec refuses it the same way, before anything runs.
		_, err = shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: cmd})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("exec of %q: %v, want InvalidArgument", cmd, err)
		}
	}
}

// A leading tilde is expanded as bash expands it: the home of the user
// the command runs as ($HOME it inherits, or the caller's), or a named
// user's; a tilde elsewhere is a name like any other.
func TestResolveHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	root, err := user.Lookup("root")
	if err != nil {
		t.Skipf("no user root to expand ~root to: %v", err)
	}
	e := &Executor{Cfg: testConfig(), Argv: bashArgv}
	for _, c := range []struct {
		workdir string
		env     map[string]string
		want    string
	}{
		{"~", nil, home},
		{"~/", nil, home},
		{"~/src/../app", nil, filepath.Join(home, "app")},
		{"~", map[string]string{"HOME": "/caller/home"}, "/caller/home"},
		{"~root", nil, root.HomeDir},
		{"~root/x", nil, filepath.Join(root.HomeDir, "x")},
		{"a/~", nil, "/work/space/a/~"},
		{"./~", nil, "/work/space/~"},
	} {
		s, err := shell.NewServer(e).Resolve(context.Background(), &shell.ExecRequest{Command: "x", Workdir: c.workdir, Env: c.env})
		if err != nil || s.Workdir != c.want {
			t.Errorf("workdir %q (env %v): %q %v, want %q", c.workdir, c.env, s.GetWorkdir(), err, c.want)
		}
	}
	_, err = shell.NewServer(e).Resolve(context.Background(), &shell.ExecRequest{Command: "x", Workdir: "~no-such-user-here/x"})
	want := "The working directory ~no-such-user-here/x starts with ~no-such-user-here, the home directory of user no-such-user-here, and there is no such user here."
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
		t.Errorf("an unknown user: %v, want %q", err, want)
	}
}

func TestEnvLayers(t *testing.T) {
	spec := &shell.ExecSpec{
		Env:    map[string]string{"TERM": "xterm", "MINE": "caller", "DSH_PROJECT": "forged"},
		DshEnv: map[string]string{"DSH_PROJECT": "trusted", "DSH_ONLY": "snap"},
	}
	env := Env(spec)
	want := map[string]string{}
	for k, v := range EnvOverrides {
		want[k] = v
	}
	want["TERM"] = "xterm"          // the caller's env over the overrides
	want["MINE"] = "caller"         // and beside them
	want["DSH_PROJECT"] = "trusted" // the snapshot over the caller's env
	want["DSH_ONLY"] = "snap"       // and beside it
	if len(env) != len(want) {
		t.Fatalf("env %v, want %v", env, want)
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s=%q (set %v), want %q", k, got, ok, v)
		}
	}
	// The overrides are not changed by a call.
	if EnvOverrides["TERM"] != "dumb" || EnvOverrides["NO_COLOR"] != "1" || EnvOverrides["PAGER"] != "cat" || EnvOverrides["GIT_TERMINAL_PROMPT"] != "0" {
		t.Fatalf("overrides: %v", EnvOverrides)
	}
}

func realExecutor(t *testing.T, environ ...string) *Executor {
	t.Helper()
	cfg := testConfig()
	cfg.Cwd = t.TempDir()
	cfg.TimeoutMs, cfg.MaxTimeoutMs = 60_000, 60_000
	return &Executor{Cfg: cfg, Sub: procstest.Serve(t, "bash", environ...), Argv: bashArgv}
}

func TestExecRunsWithTheLayeredEnv(t *testing.T) {
	// The host's ambient TERM and DSH_* never reach the command.
	e := realExecutor(t, "TERM=xterm-256color", "DSH_PROJECT=ambient", "HOSTVAR=h")
	res, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{
		Command: `printf '%s|' "$TERM" "$PAGER" "$HOSTVAR" "$MINE" "$DSH_PROJECT" "$PWD"; echo err >&2; exit 5`,
		Env:     map[string]string{"MINE": "caller", "DSH_PROJECT": "forged"},
		DshEnv:  map[string]string{"DSH_PROJECT": "trusted"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "dumb|cat|h|caller|trusted|" + e.Cfg.Cwd + "|"
	if got := string(res.Stdout.GetData()); got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	if res.GetExitCode() != 5 || string(res.Stderr.GetData()) != "err\n" || res.Workdir != e.Cfg.Cwd || res.TimeoutMs != 60_000 || res.TimedOut || res.Aborted {
		t.Fatalf("result %+v", res)
	}
}

func TestExecTimeoutIsCapped(t *testing.T) {
	e := realExecutor(t)
	e.Cfg.MaxTimeoutMs, e.Cfg.GraceMs = 300, 100
	res, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: "sleep 60", TimeoutMs: 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Aborted || res.TimeoutMs != 300 || res.Signal == "" {
		t.Fatalf("a call asking for an hour under a 300ms cap: %+v", res)
	}
}

func TestRunErrors(t *testing.T) {
	e := realExecutor(t)
	spec, err := shell.NewServer(e).Resolve(context.Background(), &shell.ExecRequest{Command: "true", Workdir: "missing"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = shell.NewServer(e).Run(context.Background(), spec)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), filepath.Join(e.Cfg.Cwd, "missing")) {
		t.Fatalf("missing workdir: %v, want FailedPrecondition naming it", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	marker := filepath.Join(e.Cfg.Cwd, "ran")
	spec, _ = shell.NewServer(e).Resolve(context.Background(), &shell.ExecRequest{Command: "touch " + marker})
	if _, err := shell.NewServer(e).Run(ctx, spec); status.Code(err) != codes.Canceled {
		t.Fatalf("a cancelled call: %v, want Canceled", err)
	}
	if _, err := shell.NewServer(e).Exec(ctx, &shell.ExecRequest{Command: "touch " + marker}); status.Code(err) != codes.Canceled {
		t.Fatalf("a cancelled exec: %v, want Canceled", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a cancelled call ran its command")
	}
}

func TestBackground(t *testing.T) {
	e := realExecutor(t)
	ctx := context.Background()
	gate := filepath.Join(e.Cfg.Cwd, "gate")
	// Start applies no timeout: this one outlives its spec's 50ms.
	spec, err := shell.NewServer(e).Resolve(ctx, &shell.ExecRequest{Command: "echo out; while [ ! -e gate ]; do sleep 0.02; done; sleep 0.2; echo done", TimeoutMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	h, err := shell.NewServer(e).Start(ctx, spec)
	if err != nil || h.Id == "" || h.Pid <= 0 {
		t.Fatalf("start: %v %v", h, err)
	}
	ref := &shellv1.ProcessRef{Id: h.Id}
	var out string
	for deadline := time.Now().Add(30 * time.Second); out != "out\n"; time.Sleep(10 * time.Millisecond) {
		r, err := shell.NewServer(e).ReadOutput(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if r.State.Status != shell.StatusRunning || r.State.ExitCode != nil {
			t.Fatalf("state before the gate: %+v", r.State)
		}
		// The data is in the read's own fields, not repeated in its facts.
		if r.StdoutFacts.GetData() != nil {
			t.Fatalf("facts carry the data: %+v", r.StdoutFacts)
		}
		out += string(r.Stdout)
		if time.Now().After(deadline) {
			t.Fatalf("stdout %q", out)
		}
	}
	time.Sleep(100 * time.Millisecond) // past the spec's timeout
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := shell.NewServer(e).Wait(ctx, ref)
	if err != nil || st.Status != shell.StatusCompleted || st.GetExitCode() != 0 || st.Signal != "" {
		t.Fatalf("wait: %+v %v", st, err)
	}
	r, err := shell.NewServer(e).ReadOutput(ctx, ref)
	if err != nil || string(r.Stdout) != "done\n" || r.State.Status != shell.StatusCompleted {
		t.Fatalf("final read: %+v %v", r, err)
	}
	if k, err := shell.NewServer(e).Kill(ctx, ref); err != nil || k.Killed {
		t.Fatalf("kill of a finished process: %v %v, want false", k, err)
	}

	// A running one is killed.
	spec, _ = shell.NewServer(e).Resolve(ctx, &shell.ExecRequest{Command: "sleep 600"})
	h, err = shell.NewServer(e).Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	ref = &shellv1.ProcessRef{Id: h.Id}
	if k, err := shell.NewServer(e).Kill(ctx, ref); err != nil || !k.Killed {
		t.Fatalf("kill: %v %v", k, err)
	}
	if st, err := shell.NewServer(e).Wait(ctx, ref); err != nil || st.Status != shell.StatusKilled || st.Signal == "" {
		t.Fatalf("wait after kill: %+v %v", st, err)
	}

	// A start that cannot spawn still hands back a handle, settled as
	// killed with the reason on stderr.
	spec, _ = shell.NewServer(e).Resolve(ctx, &shell.ExecRequest{Command: "true", Workdir: "/nonexistent/dir"})
	h, err = shell.NewServer(e).Start(ctx, spec)
	if err != nil {
		t.Fatalf("start that cannot spawn: %v", err)
	}
	ref = &shellv1.ProcessRef{Id: h.Id}
	if st, err := shell.NewServer(e).Wait(ctx, ref); err != nil || st.Status != shell.StatusKilled {
		t.Fatalf("wait on a failed spawn: %+v %v", st, err)
	}
	r, err = shell.NewServer(e).ReadOutput(ctx, ref)
	if err != nil || !strings.Contains(string(r.Stderr), "/nonexistent/dir") || r.State.Status != shell.StatusKilled {
		t.Fatalf("read of a failed spawn: %+v %v", r, err)
	}
	if _, err := shell.NewServer(e).ReadOutput(ctx, &shellv1.ProcessRef{Id: "p0-none"}); status.Code(err) != codes.NotFound {
		t.Fatalf("read of an unknown process: %v", err)
	}
}

// stubSub answers Run with a fixed error: what a ctx.subprocess that is
// older or broken might say.
type stubSub struct {
	subprocess.Processes
	err error
	got *subprocessv1.SpawnRequest
}

func (s *stubSub) Run(_ context.Context, req *subprocess.SpawnRequest) (*subprocess.Result, error) {
	s.got = req
	return nil, s.err
}

func (s *stubSub) Start(_ context.Context, req *subprocess.SpawnRequest) (*subprocess.Started, error) {
	s.got = req
	return &subprocessv1.StartResponse{Id: "p1-x", Pid: 7}, s.err
}

func TestExecDoesNotPassOnUnimplemented(t *testing.T) {
	// As procs.Client hands errors on: in the seam's words.
	stub := &stubSub{err: sdk.FromRPC(status.Error(codes.Unimplemented, "no Run here"))}
	e := &Executor{Cfg: testConfig(), Sub: stub, Argv: bashArgv}
	_, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: "true"})
	// UNIMPLEMENTED from Exec would read as "this executor has no Exec".
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "no Run here") {
		t.Fatalf("exec over an unimplemented Run: %v, want Internal with the reason", err)
	}
	// Run itself passes the error on as it came.
	spec, _ := shell.NewServer(e).Resolve(context.Background(), &shell.ExecRequest{Command: "true"})
	if _, err := shell.NewServer(e).Run(context.Background(), spec); status.Code(err) != codes.Unimplemented {
		t.Fatalf("run: %v", err)
	}
	stub.err = subprocess.CannotStart(errors.New("no shell"))
	if _, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: "true"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("exec over a failed spawn: %v", err)
	}
}

func TestSpawnRequests(t *testing.T) {
	stub := &stubSub{err: errors.New("x")}
	e := &Executor{Cfg: testConfig(), Sub: stub, Argv: func(s *shell.ExecSpec) []string { return []string{"sh", "-c", s.Command, "argv0"} }}
	spec, _ := shell.NewServer(e).Resolve(context.Background(), &shell.ExecRequest{Command: "cmd", Workdir: "w", TimeoutMs: 200, MaxOutputBytes: 9, Stdin: []byte("s"), HasStdin: true, Owner: "o", Env: map[string]string{"K": "v"}})
	_, _ = shell.NewServer(e).Run(context.Background(), spec)
	g := stub.got
	if strings.Join(g.Argv, " ") != "sh -c cmd argv0" || g.Dir != "/work/space/w" || g.TimeoutMs != 200 || g.MaxOutputBytes != 9 || g.MaxSpillBytes != 777 || g.GraceMs != 42 || string(g.Stdin) != "s" || !g.HasStdin || g.Owner != "o" || g.Env["K"] != "v" || g.Env["TERM"] != "dumb" || g.SettleFailure {
		t.Fatalf("run request %+v", g)
	}
	stub.err = nil
	if _, err := shell.NewServer(e).Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	// A background process always gets a handle (ctx.subprocess's Start
	// applies no timeout: TestBackground).
	if g := stub.got; !g.SettleFailure || g.Dir != "/work/space/w" {
		t.Fatalf("start request %+v", g)
	}
	if spec.TimeoutMs != 200 {
		t.Fatalf("Start changed the spec: %+v", spec)
	}
}

// Limits are what Resolve fills and caps with, so a caller that reads
// them knows what a request resolves to.
func TestLimitsAreWhatResolveApplies(t *testing.T) {
	cfg := testConfig()
	cfg.Cwd, cfg.MaxProcesses, cfg.MaxMemoryBytes = "/work/space/", 64, -1
	e := &Executor{Cfg: cfg, Argv: bashArgv}
	lim, err := shell.NewServer(e).Limits(context.Background(), &shellv1.LimitsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	def, _ := e.Resolve(context.Background(), &shell.ExecRequest{Command: "x"})
	max, _ := e.Resolve(context.Background(), &shell.ExecRequest{Command: "x", TimeoutMs: 1 << 40, MaxOutputBytes: 1 << 40})
	if lim.Workdir != def.Workdir || lim.TimeoutMs != def.TimeoutMs || lim.MaxTimeoutMs != max.TimeoutMs || lim.GraceMs != def.GraceMs ||
		lim.MaxOutputBytes != max.MaxOutputBytes || lim.MaxSpillBytes != def.MaxSpillBytes || lim.MaxProcesses != def.MaxProcesses || lim.MaxMemoryBytes != def.MaxMemoryBytes {
		t.Fatalf("limits %+v; resolved %+v and %+v", lim, def, max)
	}
	if lim.Workdir != "/work/space" || lim.TimeoutMs != 1000 || lim.MaxTimeoutMs != 5000 || lim.GraceMs != 42 || lim.MaxProcesses != 64 || lim.MaxMemoryBytes != -1 {
		t.Fatalf("limits %+v", lim)
	}
}
