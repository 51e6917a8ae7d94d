// Command dsh-terminal-bash is the terminal backend of the shells dsh
// knows: it registers with ctx.terminals under a name (its dialect's, bash
// or pwsh, by default) and starts each session as an interactive shell of
// its dialect on a terminal of ctx.subprocess. A bash reads no rc file but
// the session's own, handed to it through a pipe: its prompt is one the
// registry recognises (a mark of the session's own, then "$ "), and
// PROMPT_COMMAND sets it again before every prompt, so a command that
// changes PS1 does not blind the registry; the mark is in no process's
// environment or command line. A PowerShell (shellDialect pwsh, see
// pwsh.go) gets its rc text the same way, runs without a profile, and has
// a prompt no command can replace. A session starts with the trusted DSH_*
// facts of ctx.shellEnv when one is composed, and confined by ctx.sandbox
// under the composition's sandbox section when it has one (a terminal is
// no way around the fence its commands have). It keeps nothing per
// session: a session outlives this plugin's reloads and crashes, and its
// next process types into the same terminal.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/plugins/shellenv"
	"github.com/dshrun/dsh/plugins/termbackend"
	"github.com/dshrun/dsh/plugins/termbackend/terminalv1"
	"github.com/dshrun/dsh/sdk"
)

// config is terminal-bash's config.
type config struct {
	// Name is what ctx.terminals publishes the backend as; Open names it
	// to choose this backend.
	// Empty means the dialect's name.
	Name string `json:"name" pattern:"^[A-Za-z0-9._-]{1,64}$" desc:"the backend name sessions are opened with (the dialect's: bash, or pwsh)"`
	// ShellDialect is the dialect of the shell started: which shell, how
	// its prompt looks, how a line is submitted.
	ShellDialect string `json:"shellDialect" default:"bash" pattern:"^(bash|pwsh)$" desc:"the shell the sessions run: bash, or pwsh (PowerShell 7)"`
	// Shell is the program to start (looked up on PATH); empty means the
	// dialect's own.
	Shell string `json:"shell" desc:"the shell binary, found on PATH (bash for the bash dialect, pwsh for pwsh)"`
	// Cwd is where a session starts when Open names no directory; empty
	// means this plugin's working directory.
	Cwd string `json:"cwd" desc:"where sessions start when none is named (this plugin's working directory)"`
	// Term is TERM in the sessions.
	Term string `json:"term" default:"xterm-256color" desc:"TERM in the sessions (xterm-256color)"`
	// SandboxMode is the mode sessions are confined in, under the
	// composition's sandbox section; empty means its defaultMode. Without
	// a sandbox section sessions are not confined.
	SandboxMode string `json:"sandboxMode" pattern:"^(|read-only|workspace-write|danger-full-access)$" desc:"the sandbox mode sessions run in under the composition's sandbox section (its defaultMode)"`
}

type terminalBash struct {
	cfg    config
	sub    *subprocess.Client
	env    *shellenv.Follower // ctx.shellEnv, when composed
	policy *sandbox.Policy    // the composition's sandbox section; nil for none
	box    sandbox.Sandboxes
}

var _ termbackend.Backend = (*terminalBash)(nil)

func (p *terminalBash) Describe() sdk.Description {
	return sdk.Description{
		Name:         "terminal-bash",
		Version:      "0.1.0",
		Summary:      "a ctx.terminals backend: interactive bash (or PowerShell) sessions with a prompt the registry recognises",
		Inject:       []sdk.Inject{{Key: subprocess.Key}, {Key: terminals.Key}, {Key: shellenv.Key, Optional: true}, {Key: sandbox.Key}, {Key: sandbox.PolicyKey}},
		ConfigSchema: sdk.SchemaOf[config](),
	}
}

func (p *terminalBash) Dispose(context.Context) error {
	if p.env != nil {
		p.env.Close()
	}
	return nil
}

func (p *terminalBash) Register(s *grpc.Server) {
	terminalv1.RegisterBackendServer(s, termbackend.NewServer(p))
}

func (p *terminalBash) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return err
	}
	// A dialect's name is its backend's and its program's by default.
	if cfg.Name == "" {
		cfg.Name = cfg.ShellDialect
	}
	if cfg.Shell == "" {
		cfg.Shell = cfg.ShellDialect
	}
	policy, err := sandbox.NewClient(host.Conn(sandbox.PolicyKey)).Get(ctx)
	switch {
	case errors.Is(err, sandbox.ErrNoPolicy):
		policy = nil
		if cfg.SandboxMode != "" {
			return fmt.Errorf("sandboxMode %s needs the composition's sandbox section, and there is none", cfg.SandboxMode)
		}
	case err != nil:
		return fmt.Errorf("terminal-bash needs to know the composition's sandbox policy: %w", err)
	}
	p.cfg, p.policy = cfg, policy
	p.box = sandbox.NewRunnerClient(host.Conn(sandbox.Key))
	p.sub = subprocess.NewClient(host.Conn(subprocess.Key))
	p.env = shellenv.NewClient(host.Conn(shellenv.Key)).Follow()
	return terminals.NewClient(host.Conn(terminals.Key)).RegisterBackend(ctx, cfg.Name, cfg.ShellDialect)
}

// Argv is the shell a session runs: PwshArgv for pwsh; for bash, a bash
// that hands the session's prompt, from the environment variable rcVar, to
// the interactive bash it becomes as its rc file (through a pipe on fd 3,
// closed once read), and drops the variable first: the interactive shell
// reads no other rc file, and the prompt's nonce is in neither its
// environment nor its command line (nor its children's).
func (p *terminalBash) Argv() []string {
	if p.cfg.ShellDialect == dialectPwsh {
		return PwshArgv(p.cfg.Shell)
	}
	return []string{p.cfg.Shell, "--norc", "--noprofile", "-c",
		`r=$` + rcVar + `;unset ` + rcVar + `;exec "$0" --noprofile --rcfile /dev/fd/3 -i 3<<<"$r"`, p.cfg.Shell}
}

// rcVar carries a session's rc text to the shell that starts it.
const rcVar = "DSH_TERMINAL_RC"

// Prompt is a session's PS1 and the bytes bash prints for it: the mark
// (an OSC 133 prompt mark, which terminals do not show, naming the
// session's own nonce), then "$ ".
func Prompt(nonce string) (ps1 string, printed []byte) {
	mark := "\x1b]133;A;dsh=" + nonce + "\a"
	return `\[\e]133;A;dsh=` + nonce + `\a\]$ `, []byte(mark + "$ ")
}

// Env is a session's environment over the host's: its rc text (the
// prompt, and PROMPT_COMMAND setting it again before every prompt, so a
// command that changes PS1 does not blind the registry; both are shell
// variables, kept from the session's children), the terminal type, and
// no history file.
func Env(ps1, term string) map[string]string {
	rc := "PS1=" + shellQuote(ps1) + "\nPROMPT_COMMAND=" + shellQuote("PS1="+shellQuote(ps1)) + "\nexec 3<&-\n"
	return map[string]string{
		rcVar:      rc,
		"TERM":     term,
		"HISTFILE": "",
	}
}

// shellQuote is s in single quotes.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (p *terminalBash) Start(ctx context.Context, req *termbackend.StartRequest) (*termbackend.Started, error) {
	cwd := req.Cwd
	if cwd == "" {
		cwd = p.cfg.Cwd
	}
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return nil, termbackend.CannotStart(fmt.Errorf("no working directory: %w", err))
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	env, printed := p.rc(hex.EncodeToString(b[:]))
	snap, err := p.env.Snapshot(ctx)
	switch {
	case errors.Is(err, sdk.ErrNotProvided):
		// No ctx.shellEnv composed: no facts.
	case err != nil:
		return nil, termbackend.CannotStart(fmt.Errorf("the DSH_* environment could not be read: %w", err))
	default:
		for k, v := range snap.Env {
			env[k] = v
		}
	}
	w, err := p.confine(ctx, p.Argv())
	if err != nil {
		return nil, err
	}
	st, err := p.sub.SpawnTerminal(ctx, &subprocess.TerminalRequest{
		Argv:        w.Argv,
		Confinement: w.Confinement,
		Dir:         cwd,
		Env:         env,
		Cols:        req.Cols,
		Rows:        req.Rows,
	})
	if err != nil {
		p.release(ctx, w.Settle)
		if errors.Is(err, subprocess.ErrCannotStart) || errors.Is(err, subprocess.ErrInvalid) {
			return nil, termbackend.CannotStart(err)
		}
		return nil, err
	}
	return &termbackend.Started{
		ProcessId: st.Id,
		Pid:       st.Pid,
		Cwd:       cwd,
		Dialect:   &termbackend.Dialect{Name: p.cfg.ShellDialect, Prompt: printed},
		// The host settles it after each send and at the session's end:
		// this plugin keeps nothing per session.
		Settle: w.Settle,
	}, nil
}

// rc is a session's environment over the host's, its rc text in it, and
// the bytes its prompt prints, for the prompt's nonce.
func (p *terminalBash) rc(nonce string) (env map[string]string, printed []byte) {
	if p.cfg.ShellDialect == dialectPwsh {
		prompt, printed := PwshPrompt(nonce)
		return PwshEnv(PwshRC(prompt), p.cfg.Term), printed
	}
	ps1, printed := Prompt(nonce)
	return Env(ps1, p.cfg.Term), printed
}

// release ends the sandbox's watch of a shell that did not start: a watch
// never settled keeps what appears in the roots from being forgotten.
func (p *terminalBash) release(ctx context.Context, token string) {
	if token == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = p.box.Settle(ctx, &sandbox.SettleRequest{Settle: token})
}

// Mode is the sandbox mode sessions run in; empty when they are not
// confined (no sandbox section).
func (p *terminalBash) Mode() string {
	switch {
	case p.policy == nil:
		return ""
	case p.cfg.SandboxMode != "":
		return p.cfg.SandboxMode
	}
	return p.policy.DefaultMode
}

// confine wraps argv through ctx.sandbox in the sessions' mode; with no
// sandbox section, or in danger-full-access, it runs as it is. A shell
// that cannot be confined does not start.
func (p *terminalBash) confine(ctx context.Context, argv []string) (*sandbox.Wrapped, error) {
	mode := p.Mode()
	if mode == "" || mode == sandbox.DangerFullAccess {
		return &sandbox.Wrapped{Argv: argv}, nil
	}
	w, err := p.box.Wrap(ctx, &sandbox.WrapRequest{Argv: argv, Mode: mode, Policy: sandbox.ForMode(p.policy, mode)})
	switch {
	case errors.Is(err, sandbox.ErrUnavailable):
		return nil, termbackend.CannotStart(fmt.Errorf("the sandbox cannot confine a terminal here, so none was started: %w", err))
	case err != nil:
		return nil, fmt.Errorf("the sandbox could not be asked, so no terminal was started: %w", err)
	}
	return w, nil
}

// Send types text, then Enter (a carriage return, as a terminal sends it)
// when it is submitted.
func (p *terminalBash) Send(ctx context.Context, req *termbackend.SendRequest) (bool, error) {
	data := req.Text
	if req.Submit {
		data += "\r"
	}
	written, err := p.sub.WriteTerminal(ctx, req.ProcessId, []byte(data))
	if errors.Is(err, subprocess.ErrNotFound) || errors.Is(err, subprocess.ErrInvalid) {
		return false, termbackend.NotFound(err)
	}
	return written, err
}

func main() { sdk.Serve(&terminalBash{}) }
