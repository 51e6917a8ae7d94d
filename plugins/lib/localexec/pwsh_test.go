package localexec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/host/procs/procstest"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/plugins/lib/pwshargs"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

// script is the PowerShell script of a pwsh command line, checking the
// parameters before it.
func script(t *testing.T, argv []string, program string) string {
	t.Helper()
	if len(argv) != 8 || argv[0] != program || strings.Join(argv[1:7], " ") != "-NoLogo -NoProfile -NonInteractive -OutputFormat Text -EncodedCommand" {
		t.Fatalf("argv %.120q", argv)
	}
	s, err := pwshargs.DecodeCommand(argv[7])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A pwsh executor hands pwsh the command's script as -EncodedCommand, its
// own variables over the shared overrides and under the caller's, and
// everything else as a bash executor does.
func TestPwshSpawnRequest(t *testing.T) {
	stub := &stubSub{err: errors.New("x")}
	e := Pwsh()
	e.Cfg, e.Sub = testConfig(), stub
	cmd := "Get-ChildItem | Select-Object Name; git log -1 'it''s'"
	_, _ = shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{
		Command: cmd, Workdir: "w", Stdin: []byte("in"), HasStdin: true,
		Env:    map[string]string{"POWERSHELL_UPDATECHECK": "LTS", "MINE": "m"},
		DshEnv: map[string]string{"DSH_X": "trusted"},
	})
	g := stub.got
	if got := script(t, g.Argv, "pwsh"); got != pwshargs.Script(cmd) {
		t.Fatalf("script:\n%s\nwant:\n%s", got, pwshargs.Script(cmd))
	}
	if len(g.Script) != 0 || g.Dir != "/work/space/w" || string(g.Stdin) != "in" || !g.HasStdin {
		t.Fatalf("request %+v", g)
	}
	for k, v := range map[string]string{
		"NO_COLOR": "1", "TERM": "dumb", "GIT_PAGER": "cat", "POWERSHELL_TELEMETRY_OPTOUT": "1",
		"POWERSHELL_UPDATECHECK": "LTS", "MINE": "m", "DSH_X": "trusted",
	} {
		if g.Env[k] != v {
			t.Errorf("%s=%q, want %q", k, g.Env[k], v)
		}
	}
	if len(g.Env) != len(EnvOverrides)+len(PwshEnv)+2 {
		t.Errorf("env %v", g.Env)
	}
	// A bash executor's environment has none of PowerShell's.
	b := &Executor{Cfg: testConfig(), Sub: stub, Argv: bashArgv}
	_, _ = shell.NewServer(b).Exec(context.Background(), &shell.ExecRequest{Command: "true"})
	if _, ok := stub.got.Env["POWERSHELL_TELEMETRY_OPTOUT"]; ok || len(stub.got.Env) != len(EnvOverrides) {
		t.Fatalf("bash env %v", stub.got.Env)
	}
}

// Up to pwshargs.MaxInline bytes a command is in the command line; a
// longer one reaches pwsh on descriptor 3, whose script reads it there.
func TestPwshLongCommandOnDescriptor3(t *testing.T) {
	stub := &stubSub{err: errors.New("x")}
	e := Pwsh()
	e.Cfg, e.Sub = testConfig(), stub
	e.ScriptArgv, e.ScriptFile = (&pwsh{program: "pwsh"}).fdArgv, nil
	for _, n := range []int{pwshargs.MaxInline, pwshargs.MaxInline + 1, 8 << 20} {
		cmd := strings.Repeat("x", n)
		_, _ = shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: cmd})
		s := script(t, stub.got.Argv, "pwsh")
		switch {
		case n <= pwshargs.MaxInline && (s != pwshargs.Script(cmd) || len(stub.got.Script) != 0):
			t.Fatalf("a command of %d bytes: script of %d bytes on descriptor 3", n, len(stub.got.Script))
		case n > pwshargs.MaxInline && (s != pwshargs.ScriptFromFD(3) || string(stub.got.Script) != cmd):
			t.Fatalf("a command of %d bytes: %d bytes on descriptor 3, command line script:\n%s", n, len(stub.got.Script), s)
		}
	}
}

// fileSub reads the script file a spawn names while the command would run.
type fileSub struct {
	subprocess.Processes
	path, text string
	mode       os.FileMode
}

func (s *fileSub) Run(_ context.Context, req *subprocess.SpawnRequest) (*subprocess.Result, error) {
	sc, _ := pwshargs.DecodeCommand(req.Argv[len(req.Argv)-1])
	_, rest, _ := strings.Cut(sc, "Get-Content -LiteralPath '")
	s.path, _, _ = strings.Cut(rest, "' ")
	fi, err := os.Stat(s.path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.path)
	s.text, s.mode = string(b), fi.Mode().Perm()
	code := int32(0)
	return &subprocessv1.Result{Status: subprocessv1.Status_STATUS_COMPLETED, ExitCode: &code}, err
}

// Where there is no descriptor 3 (Windows), a long command is a file only
// its user may read, named in the script, which removes it once read; the
// executor removes it too once the command ended, if the command did not.
func TestPwshLongCommandInAFile(t *testing.T) {
	sub := &fileSub{}
	e := Pwsh()
	e.Cfg, e.Sub = testConfig(), sub
	e.ScriptArgv, e.ScriptFile = nil, (&pwsh{program: "pwsh"}).fileArgv
	cmd := strings.Repeat("é'", pwshargs.MaxInline)
	res, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: cmd})
	if err != nil || res.GetExitCode() != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if sub.text != cmd || sub.mode != 0o600 || !strings.HasPrefix(filepath.Base(sub.path), "dsh-command-") {
		t.Fatalf("file %s (mode %v) held %d bytes, want the %d of the command", sub.path, sub.mode, len(sub.text), len(cmd))
	}
	if _, err := os.Stat(sub.path); !os.IsNotExist(err) {
		t.Fatalf("the script file is still there: %v", err)
	}
	want := pwshargs.ScriptFromFile(sub.path)
	stub := &stubSub{err: errors.New("x")}
	e.Sub = stub
	_, _ = shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: cmd})
	if got := script(t, stub.got.Argv, "pwsh"); !strings.HasPrefix(got, want[:strings.Index(want, "Get-Content ")]) {
		t.Fatalf("script:\n%s", got)
	}
}

// A missing PowerShell is one sentence naming it and where to install it,
// in the foreground and the background alike; a configured program is
// named as the config's.
func TestPwshNotInstalled(t *testing.T) {
	e := Pwsh()
	e.Cfg, e.Sub = realExecutor(t).Cfg, procstest.Serve(t, "bash")
	none := map[string]string{"PATH": t.TempDir()}
	want := "pwsh (PowerShell 7) is not installed on this machine: see " + PwshInstall + " to install it, or set program in this executor's config to the PowerShell to run."
	_, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: "Get-Date", Env: none})
	if status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != want {
		t.Fatalf("exec: %v", err)
	}
	spec, err := e.Resolve(context.Background(), &shell.ExecRequest{Command: "Get-Date", Env: none})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(context.Background(), spec); !errors.Is(err, shell.ErrCannotRun) || err.Error() != want {
		t.Fatalf("start: %v", err)
	}
	_, take, err := e.Own.Parse(json.RawMessage(`{"program": "/opt/no/such/pwsh"}`))
	if err != nil {
		t.Fatal(err)
	}
	take()
	_, err = e.Exec(context.Background(), &shell.ExecRequest{Command: "Get-Date"})
	if want := "/opt/no/such/pwsh is not installed on this machine: it is the PowerShell this executor's config names as program; see " + PwshInstall + " to install PowerShell."; !errors.Is(err, shell.ErrCannotRun) || err.Error() != want {
		t.Fatalf("a configured program: %v", err)
	}
}

// standIn writes a program named pwsh that is not PowerShell: it records
// what it was handed (its argv, environment, stdin and descriptor 3) in
// its folder, prints UTF-8 text on stdout and a line on stderr, and exits
// with $STANDIN_EXIT; with $STANDIN_SLEEP set it first waits on a child
// that sleeps, whose pid it records. It gives the folder, to put first on
// a command's PATH.
func standIn(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sh := `#!/bin/sh
d=$(dirname "$0")
printf '%s\0' "$@" > "$d/argv"
env > "$d/env"
cat > "$d/stdin"
if [ -e /dev/fd/3 ]; then cat <&3 > "$d/fd3"; else rm -f "$d/fd3"; fi
printf 'h\303\251llo \342\234\223\n'
echo 'to stderr' >&2
if [ -n "$STANDIN_SLEEP" ]; then sleep 30 & echo $! > "$d/child"; wait; fi
exit "${STANDIN_EXIT:-0}"
`
	if err := os.WriteFile(filepath.Join(dir, "pwsh"), []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// record is what the stand-in recorded under name.
func record(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// What a pwsh executor hands the program it runs, as that program sees
// it, and what the executor makes of the program's output and exit: with
// a stand-in for pwsh, which runs no PowerShell.
func TestPwshStandIn(t *testing.T) {
	dir := standIn(t)
	e := Pwsh()
	e.Cfg, e.Sub = realExecutor(t).Cfg, procstest.Serve(t, "bash")
	env := map[string]string{"PATH": dir + string(os.PathListSeparator) + os.Getenv("PATH"), "STANDIN_EXIT": "7"}
	cmd := "Write-Output 'héllo ✓'; exit 7"
	res, err := shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: cmd, Env: env, Stdin: []byte("ïn\n"), HasStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetExitCode() != 7 || res.Signal != "" || string(res.Stdout.GetData()) != "héllo ✓\n" || string(res.Stderr.GetData()) != "to stderr\n" {
		t.Fatalf("result: exit %d, stdout %q, stderr %q", res.GetExitCode(), res.Stdout.GetData(), res.Stderr.GetData())
	}
	argv := strings.Split(strings.TrimSuffix(record(t, dir, "argv"), "\x00"), "\x00")
	if got := script(t, append([]string{"pwsh"}, argv...), "pwsh"); got != pwshargs.Script(cmd) {
		t.Fatalf("the program got the script:\n%s", got)
	}
	seen := record(t, dir, "env")
	for _, kv := range []string{"NO_COLOR=1", "TERM=dumb", "POWERSHELL_TELEMETRY_OPTOUT=1", "POWERSHELL_UPDATECHECK=Off", "STANDIN_EXIT=7"} {
		if !strings.Contains("\n"+seen, "\n"+kv+"\n") {
			t.Errorf("environment lacks %s:\n%s", kv, seen)
		}
	}
	if got := record(t, dir, "stdin"); got != "ïn\n" {
		t.Fatalf("stdin %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "fd3")); !os.IsNotExist(err) {
		t.Fatalf("a short command opened descriptor 3: %v", err)
	}

	// A long command: its text on descriptor 3, exactly.
	long := "# " + strings.Repeat("ü", pwshargs.MaxInline) + "\nexit 0"
	env["STANDIN_EXIT"] = "0"
	if res, err = shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: long, Env: env}); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("long command: %v %+v", err, res)
	}
	if got := record(t, dir, "fd3"); got != long {
		t.Fatalf("descriptor 3 held %d bytes, want the command's %d", len(got), len(long))
	}
	argv = strings.Split(strings.TrimSuffix(record(t, dir, "argv"), "\x00"), "\x00")
	if got := script(t, append([]string{"pwsh"}, argv...), "pwsh"); got != pwshargs.ScriptFromFD(3) {
		t.Fatalf("the program got the script:\n%s", got)
	}

	// A timeout kills the program and what it started; a background run
	// ends with the program's exit code.
	env["STANDIN_SLEEP"] = "1"
	res, err = shell.NewServer(e).Exec(context.Background(), &shell.ExecRequest{Command: "Start-Sleep 30", Env: env, TimeoutMs: 300})
	if err != nil || !res.TimedOut || res.Signal == "" {
		t.Fatalf("timeout: %v %+v", err, res)
	}
	if child, _ := strconv.Atoi(strings.TrimSpace(record(t, dir, "child"))); child == 0 || testplugins.Alive(child) {
		t.Fatalf("the program's child %d outlived the timeout", child)
	}
	delete(env, "STANDIN_SLEEP")
	env["STANDIN_EXIT"] = "5"
	spec, err := e.Resolve(context.Background(), &shell.ExecRequest{Command: "exit 5", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps, err := e.Wait(ctx, st.Id)
	if err != nil || ps.Status != shell.StatusCompleted || ps.GetExitCode() != 5 {
		t.Fatalf("background: %v %+v", err, ps)
	}
}

// A pwsh executor's config is the shared one and program: every key of a
// bash executor's config means the same to it, and program is its own (a
// bash executor refuses it).
func TestPwshConfig(t *testing.T) {
	e := Pwsh()
	d := (&Plugin{Exec: e}).Describe()
	if d.ConfigSchema != sdk.SchemaOf[PwshConfig]() || d.SettingsNamespace != shell.SettingsNamespace {
		t.Fatalf("description %+v", d)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal([]byte(d.ConfigSchema), &schema); err != nil {
		t.Fatal(err)
	}
	var shared struct {
		Properties map[string]any `json:"properties"`
	}
	_ = json.Unmarshal([]byte(sdk.SchemaOf[Config]()), &shared)
	for k, v := range shared.Properties {
		if !reflect.DeepEqual(schema.Properties[k], v) {
			t.Errorf("%s: %v, a bash executor's is %v", k, schema.Properties[k], v)
		}
	}
	if _, ok := schema.Properties["program"]; !ok || len(schema.Properties) != len(shared.Properties)+1 {
		t.Fatalf("properties %v", schema.Properties)
	}

	raw := json.RawMessage(`{"cwd": "/w", "timeoutMs": 5000, "maxOutputBytes": 10, "program": "/opt/pwsh"}`)
	c, take, err := e.Own.Parse(raw)
	bash, berr := ParseConfig(json.RawMessage(`{"cwd": "/w", "timeoutMs": 5000, "maxOutputBytes": 10}`))
	if err != nil || berr != nil || c != bash {
		t.Fatalf("%+v %v; a bash executor's %+v %v", c, err, bash, berr)
	}
	p := &pwsh{program: "pwsh"}
	if _, take, _ = p.parse(raw); p.program != "pwsh" {
		t.Fatal("parse kept the program before it was applied")
	}
	take()
	if p.program != "/opt/pwsh" || !p.configured {
		t.Fatalf("applied: %+v", p)
	}
	for raw, want := range map[string]string{
		`{"shell": "zsh"}`:                         `unknown field "shell"`,
		`{"program": 7}`:                           "program",
		`{"timeoutMs": 9000, "maxTimeoutMs": 10}`:  "timeoutMs 9000 is above maxTimeoutMs 10",
		`{"program": "/x", "maxOutputBytes": "1"}`: "maxOutputBytes",
	} {
		if _, _, err := p.parse(json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("%s: %v, want an error with %q", raw, err, want)
		}
	}
	if _, err := ParseConfig(json.RawMessage(`{"program": "pwsh"}`)); err == nil || !strings.Contains(err.Error(), `unknown field "program"`) {
		t.Fatalf("a bash executor took program: %v", err)
	}
}
