// Package localexec holds the mechanics every local executor shares: defaults
// and caps (Resolve), the model-friendly environment, the fused deadline and
// cause classification (through ctx.subprocess), and background handles.
// An executor supplies only its argv (bash -c, pwsh -EncodedCommand, a
// sandbox wrapper around either) through Executor.Argv, and what else its
// shell needs (Pwsh).
package localexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

// Config is an executor's configuration (the `shell` settings namespace,
// overlaid with the entry's config). Zero fields mean the defaults.
type Config struct {
	// Cwd is the default working directory and the base of relative ones;
	// "" means the host's working directory.
	Cwd string `json:"cwd" desc:"default working directory"`
	// TimeoutMs is the default foreground timeout.
	TimeoutMs int64 `json:"timeoutMs" minimum:"1" desc:"default foreground timeout (120000)"`
	// MaxTimeoutMs caps a per-call timeout.
	MaxTimeoutMs int64 `json:"maxTimeoutMs" minimum:"1" desc:"cap on a per-call timeout (600000)"`
	// MaxOutputBytes bounds each stream's output held in memory.
	MaxOutputBytes int64 `json:"maxOutputBytes" minimum:"1" desc:"output held in memory per stream (64000)"`
	// MaxSpillBytes caps each stream's spill file.
	MaxSpillBytes int64 `json:"maxSpillBytes" minimum:"0" desc:"spill file cap per stream (67108864)"`
	// GraceMs is the time between SIGTERM and SIGKILL.
	GraceMs int64 `json:"graceMs" minimum:"0" desc:"SIGTERM to SIGKILL grace (3000)"`
	// MaxProcesses caps the tasks (processes and threads) alive at once
	// in each command's tree, foreground or background: a fork beyond it
	// fails. 0 means the host's default, -1 no limit.
	MaxProcesses int64 `json:"maxProcesses" minimum:"-1" desc:"tasks (processes and threads) one command may have alive at once; 0 is the host's default (4096), -1 no limit"`
	// MaxMemoryBytes caps each command tree's memory (swap included):
	// beyond it the kernel kills a process of the tree. 0 means the
	// host's default, -1 no limit.
	MaxMemoryBytes int64 `json:"maxMemoryBytes" minimum:"-1" desc:"memory in bytes one command may use, swap included; 0 is the host's default (half the machine's memory), -1 no limit"`
}

// ParseConfig decodes and defaults a config object (its JSON Schema is
// sdk.SchemaOf[Config]). The defaults are shell.DefaultLimits: what a
// caller assumes of an executor that does not say its own.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c, err := sdk.DecodeConfig[Config](raw)
	if err != nil {
		return c, err
	}
	return c.complete()
}

// complete is c with every default filled in and checked.
func (c Config) complete() (Config, error) {
	if c.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return c, fmt.Errorf("config: no cwd given and the working directory is unknown: %w", err)
		}
		c.Cwd = wd
	}
	if !filepath.IsAbs(c.Cwd) {
		abs, err := filepath.Abs(c.Cwd)
		if err != nil {
			return c, err
		}
		c.Cwd = abs
	}
	d := shell.DefaultLimits()
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.TimeoutMs, d.TimeoutMs)
	def(&c.MaxTimeoutMs, d.MaxTimeoutMs)
	def(&c.MaxOutputBytes, d.MaxOutputBytes)
	def(&c.MaxSpillBytes, d.MaxSpillBytes)
	def(&c.GraceMs, d.GraceMs)
	if c.TimeoutMs > c.MaxTimeoutMs {
		return c, fmt.Errorf("config: timeoutMs %d is above maxTimeoutMs %d", c.TimeoutMs, c.MaxTimeoutMs)
	}
	return c, nil
}

// EnvOverrides keeps common tools from paging, colouring or prompting. They
// are the first layer: the caller's env and then the trusted DSH_* snapshot
// override them.
var EnvOverrides = map[string]string{
	"NO_COLOR":                "1",
	"TERM":                    "dumb",
	"PAGER":                   "cat",
	"GIT_PAGER":               "cat",
	"MANPAGER":                "cat",
	"SYSTEMD_PAGER":           "",
	"LESS":                    "-FRX",
	"GIT_TERMINAL_PROMPT":     "0",
	"GCM_INTERACTIVE":         "never",
	"GH_PROMPT_DISABLED":      "1",
	"DEBIAN_FRONTEND":         "noninteractive",
	"PIP_NO_INPUT":            "1",
	"NPM_CONFIG_YES":          "true",
	"HOMEBREW_NO_AUTO_UPDATE": "1",
	"CLICOLOR":                "0",
}

// Executor is a shell.Executor over ctx.subprocess (served with
// shell.NewServer).
type Executor struct {
	Cfg Config
	Sub subprocess.Processes // usually subprocess.NewClient(host.Conn(subprocess.Key))
	// Argv turns a resolved spec into the command line, e.g.
	// ["bash", "-c", spec.Command]. It is the one thing executors differ in.
	Argv func(spec *shell.ExecSpec) []string
	// ScriptArgv, if set, is the command line of a command longer than
	// ArgvMax: one that reads the command on descriptor 3
	// (subprocess.ScriptFD), e.g. BashScriptArgv. Without it such a
	// command goes by Argv too, and one longer than an argument may be
	// cannot start.
	ScriptArgv func(spec *shell.ExecSpec) []string
	// Confine, if set, confines each command (a sandboxing executor): it
	// may rewrite the spawn request's argv and name its confinement, and
	// says the sandbox facts of the run. An error refuses the command:
	// nothing runs.
	Confine func(ctx context.Context, spec *shell.ExecSpec, req *subprocessv1.SpawnRequest) (*shell.SandboxInfo, error)

	// What a shell other than bash needs; all optional.

	// InlineMax, if set, is the longest command Argv takes in place of
	// ArgvMax: a shell whose argv makes a command longer.
	InlineMax int
	// ScriptFile, if set, is the command line of a command longer than
	// the inline maximum where no descriptor 3 can carry it (Windows): the
	// command is written to a new file at path, only its user may read,
	// which the command line reads and removes before the command runs.
	// It takes the place of ScriptArgv.
	ScriptFile func(spec *shell.ExecSpec, path string) []string
	// ExtraEnv are the executor's own variables: over EnvOverrides, under
	// the caller's env.
	ExtraEnv map[string]string
	// Missing, if set, says what the model reads when the program the
	// executor runs is not installed: given the command's explicit
	// environment (its PATH, if set, is where the program is looked up),
	// it is "" when the program is there, else one plain sentence naming
	// it and how to install it, in place of ctx.subprocess's words.
	Missing func(env map[string]string) string
	// Own, if set, are config keys of the executor's own beside Config's.
	Own *OwnConfig
}

// OwnConfig is how an executor reads config keys of its own.
type OwnConfig struct {
	// Schema is the JSON Schema of the whole config: Config's keys and
	// the executor's own.
	Schema string
	// Parse decodes the whole config: it gives the shared keys resolved as
	// ParseConfig resolves them, and take, which keeps the executor's own
	// (run once the config is applied).
	Parse func(raw json.RawMessage) (cfg Config, take func(), err error)
}

// parseConfig is the executor's config: the shared keys, and take for its
// own.
func (e *Executor) parseConfig(raw json.RawMessage) (Config, func(), error) {
	if e.Own == nil {
		c, err := ParseConfig(raw)
		return c, func() {}, err
	}
	return e.Own.Parse(raw)
}

var _ shell.Executor = (*Executor)(nil)

// ArgvMax is the longest command passed as an argument. Linux takes at
// most 128 KiB in one argument, and all of them with the environment
// share a limit too (a quarter of the stack limit, 2 MiB by default);
// longer commands reach the program on descriptor 3 (ScriptArgv). Below
// it the argument stays: it costs a command nothing, where reading the
// descriptor costs bash a fork.
const ArgvMax = 64 << 10

// MaxCommand is the longest command an executor takes: the largest MCP
// request (a command in a tool call is never longer).
const MaxCommand = sdk.MaxRequest

// BashScript is how bash runs a command it reads on descriptor 3 as
// `bash -c COMMAND` would: the same $0, stdin, exit status, errors
// ("bash: line N: ...") and `set -e`, evaluated in the shell itself. The
// descriptor is closed before the command runs, so nothing it starts
// holds it.
const BashScript = `eval "$(</dev/fd/3)" 3<&-`

// BashScriptArgv is the ScriptArgv of a bash executor.
func BashScriptArgv(*shell.ExecSpec) []string { return []string{"bash", "-c", BashScript} }

// subprocessError is a ctx.subprocess failure in the seam's words: a
// command that cannot be started is ErrCannotRun, a process the caller
// cannot reach ErrNotFound; the rest keep their kind.
func subprocessError(err error) error {
	switch {
	case errors.Is(err, subprocess.ErrCannotStart):
		return shell.CannotRun(err.Error())
	case errors.Is(err, subprocess.ErrNotFound):
		return shell.NotFound(err.Error())
	case errors.Is(err, subprocess.ErrSandboxUnavailable):
		return shell.SandboxUnavailable(err.Error())
	}
	return err
}

// spawnError is a failed spawn in the seam's words, with the executor's
// own sentence when its program is not installed.
func (e *Executor) spawnError(err error, env map[string]string) error {
	if e.Missing != nil && errors.Is(err, subprocess.ErrCannotStart) {
		if msg := e.Missing(env); msg != "" {
			return shell.CannotRun(msg)
		}
	}
	return subprocessError(err)
}

// NotInstalled is the executor's sentence (Missing) when the program spec
// would run is not installed, else "".
func (e *Executor) NotInstalled(spec *shell.ExecSpec) string {
	if e.Missing == nil {
		return ""
	}
	return e.Missing(e.env(spec))
}

// Resolve applies every default and cap. The working directory is the
// request's, expanded as a shell expands a leading tilde (expandHome), and
// under Cfg.Cwd when relative; none means Cfg.Cwd. A refusal is one plain
// sentence: the model reads it as is.
func (e *Executor) Resolve(ctx context.Context, req *shell.ExecRequest) (*shell.ExecSpec, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, shell.Invalid("There is no command to run: the command is empty.")
	}
	if len(req.Command) > MaxCommand {
		return nil, shell.Invalid(fmt.Sprintf("The command is %d bytes, over the %d bytes (%d MiB) a command may be.", len(req.Command), MaxCommand, MaxCommand>>20))
	}
	wd, err := expandHome(req.Workdir, req.Env)
	if err != nil {
		return nil, err
	}
	switch {
	case wd == "":
		wd = e.Cfg.Cwd
	case !filepath.IsAbs(wd):
		wd = filepath.Join(e.Cfg.Cwd, wd)
	}
	timeout := req.TimeoutMs
	if timeout <= 0 {
		timeout = e.Cfg.TimeoutMs
	}
	timeout = min(timeout, e.Cfg.MaxTimeoutMs)
	maxOut := req.MaxOutputBytes
	if maxOut <= 0 || maxOut > e.Cfg.MaxOutputBytes {
		maxOut = e.Cfg.MaxOutputBytes
	}
	owner := req.Owner
	if owner == "" {
		owner = sdk.Caller(ctx)
	}
	return &shell.ExecSpec{
		Command:         req.Command,
		Workdir:         filepath.Clean(wd),
		TimeoutMs:       timeout,
		MaxOutputBytes:  maxOut,
		MaxSpillBytes:   e.Cfg.MaxSpillBytes,
		SpillAfterBytes: min(max(req.SpillAfterBytes, 0), maxOut),
		GraceMs:         e.Cfg.GraceMs,
		Stdin:           req.Stdin,
		HasStdin:        req.HasStdin,
		Env:             req.Env,
		DshEnv:          req.DshEnv,
		Owner:           owner,
		SandboxPolicy:   req.SandboxPolicy,
		MaxProcesses:    e.Cfg.MaxProcesses,
		MaxMemoryBytes:  e.Cfg.MaxMemoryBytes,
	}, nil
}

// expandHome is wd with a leading tilde expanded as bash expands it at
// the start of a word: "~" and "~/x" name the home directory of the user
// the command runs as, "~name" and "~name/x" the home directory of user
// name. Anything else comes back as it was ("x/~" and "./~" too).
//
// The user's home is what the command's $HOME will be: HOME in env (the
// caller's layer) when set, else the executor's own HOME, which is the
// host's and so what the command inherits, else the user database's
// entry of the user the executor (and so the command) runs as.
func expandHome(wd string, env map[string]string) (string, error) {
	if !strings.HasPrefix(wd, "~") {
		return wd, nil
	}
	name, rest, _ := strings.Cut(wd[1:], "/")
	if name == "" {
		home := env["HOME"]
		if home == "" {
			home = os.Getenv("HOME")
		}
		if home == "" {
			if u, err := user.Current(); err == nil {
				home = u.HomeDir
			}
		}
		if home == "" {
			return "", shell.Invalid(fmt.Sprintf("The working directory %s starts with ~, the home directory, and the home directory is not known here (HOME is not set and the user has no home in the user database).", wd))
		}
		return filepath.Join(home, rest), nil
	}
	u, err := user.Lookup(name)
	if err != nil || u.HomeDir == "" {
		return "", shell.Invalid(fmt.Sprintf("The working directory %s starts with ~%s, the home directory of user %s, and there is no such user here.", wd, name, name))
	}
	return filepath.Join(u.HomeDir, rest), nil
}

// Env layers the overrides, then the caller's env, then the trusted DSH_*
// snapshot, which nothing can displace.
func Env(spec *shell.ExecSpec) map[string]string {
	env := make(map[string]string, len(EnvOverrides)+len(spec.Env)+len(spec.DshEnv))
	for k, v := range EnvOverrides {
		env[k] = v
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	for k, v := range spec.DshEnv {
		env[k] = v
	}
	return env
}

// env is the command's explicit environment: Env, with the executor's own
// variables under the caller's.
func (e *Executor) env(spec *shell.ExecSpec) map[string]string {
	if len(e.ExtraEnv) == 0 {
		return Env(spec)
	}
	env := make(map[string]string, len(EnvOverrides)+len(e.ExtraEnv)+len(spec.Env)+len(spec.DshEnv))
	for _, layer := range []map[string]string{EnvOverrides, e.ExtraEnv, spec.Env, spec.DshEnv} {
		for k, v := range layer {
			env[k] = v
		}
	}
	return env
}

// spawn is the request for spec, confined when the executor confines, and
// the script file it wrote ("" for none), which the caller removes once
// the command ended or failed to start.
func (e *Executor) spawn(ctx context.Context, spec *shell.ExecSpec) (*subprocessv1.SpawnRequest, *shell.SandboxInfo, string, error) {
	argv, script, file := e.Argv, []byte(nil), ""
	if len(spec.Command) > e.inlineMax() {
		switch {
		case e.ScriptFile != nil:
			f, err := writeScript(spec.Command)
			if err != nil {
				return nil, nil, "", shell.CannotRun(fmt.Sprintf("The command is %d bytes, more than a command line takes, and the file to pass it in could not be written: %v", len(spec.Command), err))
			}
			file = f
			argv = func(spec *shell.ExecSpec) []string { return e.ScriptFile(spec, f) }
		case e.ScriptArgv != nil:
			argv, script = e.ScriptArgv, []byte(spec.Command)
		}
	}
	req := &subprocessv1.SpawnRequest{
		Argv:            argv(spec),
		Script:          script,
		Dir:             spec.Workdir,
		Env:             e.env(spec),
		Stdin:           spec.Stdin,
		HasStdin:        spec.HasStdin,
		Owner:           spec.Owner,
		TimeoutMs:       spec.TimeoutMs,
		GraceMs:         spec.GraceMs,
		MaxOutputBytes:  spec.MaxOutputBytes,
		MaxSpillBytes:   spec.MaxSpillBytes,
		SpillAfterBytes: spec.SpillAfterBytes,
		MaxProcesses:    spec.MaxProcesses,
		MaxMemoryBytes:  spec.MaxMemoryBytes,
	}
	if e.Confine == nil {
		return req, nil, file, nil
	}
	info, err := e.Confine(ctx, spec, req)
	return req, info, file, err
}

func (e *Executor) inlineMax() int {
	if e.InlineMax > 0 {
		return e.InlineMax
	}
	return ArgvMax
}

// Run runs in the foreground. The call's context is the caller's abort.
// A call cancelled before the command started is refused by
// ctx.subprocess, the last step before the spawn (a cancellation on the
// way there is seen only there); Run says so in its own words.
func (e *Executor) Run(ctx context.Context, spec *shell.ExecSpec) (*shell.RunResult, error) {
	req, info, file, err := e.spawn(ctx, spec)
	if err != nil {
		removeScript(file)
		return nil, notStarted(ctx, err)
	}
	res, err := e.Sub.Run(ctx, req)
	if file != "" {
		removeScript(file) // the command removed it, unless it never read it
	}
	if err != nil {
		return nil, notStarted(ctx, e.spawnError(err, req.Env)) // with the reason: an infrastructure failure
	}
	return &shell.RunResult{
		ExitCode:   res.ExitCode,
		Signal:     res.Signal,
		TimedOut:   res.TimedOut,
		Aborted:    res.Aborted,
		TimeoutMs:  spec.TimeoutMs,
		Stdout:     res.Stdout,
		Stderr:     res.Stderr,
		DurationMs: res.DurationMs,
		Workdir:    spec.Workdir,
		Sandbox:    info,
		Limits:     res.Limits,
	}, nil
}

// notStarted is err, the failure of a command that did not start, or the
// cancellation when the call was cancelled: that is why.
func notStarted(ctx context.Context, err error) error {
	if cerr := ctx.Err(); errors.Is(cerr, context.Canceled) {
		return fmt.Errorf("run: cancelled before the command started: %w", cerr)
	}
	return err
}

// Limits are what Resolve fills and caps requests with: the config.
func (e *Executor) Limits(context.Context) (*shell.Limits, error) {
	c := e.Cfg
	return &shell.Limits{
		Workdir:        filepath.Clean(c.Cwd),
		TimeoutMs:      c.TimeoutMs,
		MaxTimeoutMs:   c.MaxTimeoutMs,
		GraceMs:        c.GraceMs,
		MaxOutputBytes: c.MaxOutputBytes,
		MaxSpillBytes:  c.MaxSpillBytes,
		MaxProcesses:   c.MaxProcesses,
		MaxMemoryBytes: c.MaxMemoryBytes,
	}, nil
}

// Exec is Resolve then Run in one round trip.
func (e *Executor) Exec(ctx context.Context, req *shell.ExecRequest) (*shell.RunResult, error) {
	spec, err := e.Resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.Run(ctx, spec)
}

// Start runs in the background, with no timeout (ctx.subprocess's Start
// applies none, whatever the request says); a spawn failure settles as
// killed with the error on stderr.
//
// A missing program is the executor's sentence here too (Missing), before
// anything starts, rather than a job that settles with ctx.subprocess's.
func (e *Executor) Start(ctx context.Context, spec *shell.ExecSpec) (*shell.Started, error) {
	if msg := e.NotInstalled(spec); msg != "" {
		return nil, shell.CannotRun(msg)
	}
	req, info, file, err := e.spawn(ctx, spec)
	if err != nil {
		removeScript(file)
		return nil, err
	}
	req.SettleFailure = true
	resp, err := e.Sub.Start(ctx, req)
	if err != nil {
		removeScript(file)
		return nil, e.spawnError(err, req.Env)
	}
	if info != nil && resp.SandboxFailed {
		info.RunnerFailed = true
	}
	return &shell.Started{Id: resp.Id, Pid: resp.Pid, Sandbox: info}, nil
}

func (e *Executor) ReadOutput(ctx context.Context, id string) (*shell.ProcessRead, error) {
	r, err := e.Sub.Read(ctx, id)
	if err != nil {
		return nil, subprocessError(err)
	}
	stdout, stdoutFacts := facts(r.Stdout)
	stderr, stderrFacts := facts(r.Stderr)
	return &shell.ProcessRead{
		Stdout:          stdout,
		Stderr:          stderr,
		Lossy:           r.Lossy,
		StdoutSpillPath: stdoutFacts.GetSpillPath(),
		StderrSpillPath: stderrFacts.GetSpillPath(),
		StdoutFacts:     stdoutFacts,
		StderrFacts:     stderrFacts,
		State:           stateOf(r.Status, r.ExitCode, r.Signal, r.Limits),
	}, nil
}

func (e *Executor) Kill(ctx context.Context, id string) (bool, error) {
	killed, err := e.Sub.Kill(ctx, id)
	if err != nil {
		return false, subprocessError(err)
	}
	return killed, nil
}

func (e *Executor) Wait(ctx context.Context, id string) (*shell.ProcessState, error) {
	r, err := e.Sub.Wait(ctx, id)
	if err != nil {
		return nil, subprocessError(err)
	}
	return stateOf(r.Status, r.ExitCode, r.Signal, r.Limits), nil
}

// facts moves a stream's data out of c, which then carries only its facts
// (ProcessRead has the data in its own fields).
func facts(c *shell.Collected) ([]byte, *shell.Collected) {
	if c == nil {
		return nil, nil
	}
	data := c.Data
	c.Data = nil
	return data, c
}

func stateOf(st subprocessv1.Status, code *int32, signal string, hits []*shell.LimitHit) *shell.ProcessState {
	s := &shell.ProcessState{ExitCode: code, Signal: signal, Limits: hits}
	switch st {
	case subprocessv1.Status_STATUS_COMPLETED:
		s.Status = shell.StatusCompleted
	case subprocessv1.Status_STATUS_KILLED:
		s.Status = shell.StatusKilled
	default:
		s.Status = shell.StatusRunning
	}
	return s
}
