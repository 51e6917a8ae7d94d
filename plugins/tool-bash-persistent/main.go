// Command dsh-tool-bash-persistent is a persistent bash tool: it registers
// one tool (`bash` unless its config names another) with ctx.tools and runs
// each command in a shell of the calling agent's own that lives on between
// calls, a ctx.terminals session (so the working directory, variables and
// functions carry over, and the shell shows in terminal_list). An agent's
// calls run one at a time. Each command is typed between two marker lines
// with a fresh nonce, which the shell assembles as it runs them (the typed
// line, echoed by the terminal, never holds a marker); ctx.terminals waits
// for the end marker and returns what came between. It owns every word the
// model reads about these commands.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/sdk"
)

// config is tool-bash-persistent's config.
type config struct {
	ToolName string `json:"toolName" default:"bash" pattern:"^[A-Za-z0-9_-]{1,64}$" desc:"the tool's name (bash); another name lets it sit beside tool-bash"`
	// Backend is the ctx.terminals backend the shells open with.
	Backend string `json:"backend" desc:"the terminal backend the shells open with (the only one registered)"`
	Cwd     string `json:"cwd" desc:"where a fresh shell starts (the backend's folder)"`
	// MaxOutputChars is the model budget of one result.
	MaxOutputChars   int   `json:"maxOutputChars" minimum:"100" desc:"characters of output one result shows: its last lines (30000)"`
	DefaultTimeoutMs int64 `json:"defaultTimeoutMs" minimum:"1" desc:"a command's timeout when the call names none (120000)"`
	MaxTimeoutMs     int64 `json:"maxTimeoutMs" minimum:"1" maximum:"600000" desc:"the longest timeout a call may ask for (600000)"`
}

// The defaults of config.
const (
	defaultMaxOutputChars = 30000
	defaultTimeoutMs      = 120000
	maxTimeoutMs          = 600000
)

type persistent struct {
	cfg   config
	terms terminals.Terminals

	mu     sync.Mutex
	owners map[string]*ownerShell
}

// ownerShell is one agent's persistent shell, as this plugin knows it.
type ownerShell struct {
	turn chan struct{} // held by the call that runs; calls queue on it
	id   string        // its session; empty before the first call and after an end
	// clean: the last command ended with its marker, so the shell is back
	// at its prompt. Otherwise the next call looks first.
	clean bool
}

func (p *persistent) Describe() sdk.Description {
	return sdk.Description{
		Name:            "tool-bash-persistent",
		Version:         "0.1.0",
		Summary:         "a persistent bash tool: one shell per agent on ctx.terminals, its state kept between calls",
		Inject:          []sdk.Inject{{Key: terminals.Key}, {Key: tools.Key}},
		ConfigSchema:    sdk.SchemaOf[config](),
		ToolsFromConfig: []string{"toolName"},
	}
}

var _ tools.Handler = (*persistent)(nil)

func (p *persistent) Register(s *grpc.Server) {
	toolsv1.RegisterToolHandlerServer(s, tools.NewHandlerServer(p))
}

func (p *persistent) Dispose(context.Context) error { return nil }

func (p *persistent) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return err
	}
	if cfg.MaxOutputChars <= 0 {
		cfg.MaxOutputChars = defaultMaxOutputChars
	}
	if cfg.MaxTimeoutMs <= 0 {
		cfg.MaxTimeoutMs = maxTimeoutMs
	}
	if cfg.DefaultTimeoutMs <= 0 {
		cfg.DefaultTimeoutMs = min(defaultTimeoutMs, cfg.MaxTimeoutMs)
	}
	if cfg.DefaultTimeoutMs > cfg.MaxTimeoutMs {
		return errors.New("defaultTimeoutMs is longer than maxTimeoutMs")
	}
	p.cfg = cfg
	p.owners = map[string]*ownerShell{}
	p.terms = terminals.NewClient(host.Conn(terminals.Key))
	return tools.Register(ctx, host.Conn(tools.Key), toolSpec(cfg))
}

// args are the tool's arguments (validated by the host against the schema
// before they get here).
type args struct {
	Command   string `json:"command"`
	TimeoutMs int64  `json:"timeoutMs"`
}

func (p *persistent) Call(ctx context.Context, req *toolsv1.CallRequest) (*toolsv1.CallResult, error) {
	if req.Name != p.cfg.ToolName {
		return errorResult("tool-bash-persistent has no tool " + req.Name), nil
	}
	var a args
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return errorResult("bad arguments: " + err.Error()), nil
	}
	if strings.ContainsRune(a.Command, 0) {
		return errorResult("the command holds a NUL character, which a shell cannot take"), nil
	}
	timeout := a.TimeoutMs
	if timeout <= 0 {
		timeout = p.cfg.DefaultTimeoutMs
	}
	if timeout > p.cfg.MaxTimeoutMs {
		return errorResult("timeoutMs is at most " + strconv.FormatInt(p.cfg.MaxTimeoutMs, 10)), nil
	}
	sh := p.shellOf(req.Owner)
	select {
	case sh.turn <- struct{}{}:
	case <-ctx.Done():
		return errorResult(sentence(ctx.Err())), nil
	}
	defer func() { <-sh.turn }()
	r, err := p.run(ctx, sh, a.Command, timeout)
	if err != nil {
		return errorResult(sentence(err)), nil
	}
	return r.result(p.cfg.MaxOutputChars), nil
}

// shellOf is owner's shell record.
func (p *persistent) shellOf(owner string) *ownerShell {
	p.mu.Lock()
	defer p.mu.Unlock()
	sh := p.owners[owner]
	if sh == nil {
		sh = &ownerShell{turn: make(chan struct{}, 1)}
		p.owners[owner] = sh
	}
	return sh
}

// sessionName is the name the tool's shell has among the agent's
// terminals: a process of this plugin after a reload or a crash finds it
// by that name and goes on in it.
func (p *persistent) sessionName() string { return "persistent-" + p.cfg.ToolName }

// ran is one command's end, for the model.
type ran struct {
	out        *terminals.Sent
	timeoutMs  int64
	notes      []string // what happened to the shell first
	closed     bool     // the shell was closed after the command (timeout)
	closeErr   error
	status     int  // the exit status, when ended
	ended      bool // the end marker came
	freshShell bool // the command ran in a shell started for it
}

// run runs command in sh's shell, starting one when there is none (or the
// one there cannot take a command), within timeoutMs.
func (p *persistent) run(ctx context.Context, sh *ownerShell, command string, timeoutMs int64) (*ran, error) {
	r := &ran{timeoutMs: timeoutMs}
	if err := p.ready(ctx, sh, r); err != nil {
		return nil, err
	}
	nonce := newNonce()
	send := func() (*terminals.Sent, error) {
		return p.unlessBusy(ctx, func() (*terminals.Sent, error) {
			return p.terms.Send(ctx, &terminals.SendRequest{
				Id:     sh.id,
				Text:   typedLine(command, nonce),
				Submit: true,
				WaitMs: timeoutMs,
				Capture: &terminals.Capture{
					From:          startMarker(nonce),
					Until:         endMarker(nonce),
					MaxBytes:      int64(captureBytes(p.cfg.MaxOutputChars)),
					CloseOnCancel: true,
				},
			})
		})
	}
	out, err := send()
	if errors.Is(err, terminals.ErrNoSession) {
		// Closed since (terminal_close, or an end this plugin did not
		// see): a fresh shell.
		sh.id = ""
		r.notes = append(r.notes, noteGone)
		if err := p.ready(ctx, sh, r); err != nil {
			return nil, err
		}
		out, err = send()
	}
	if err != nil {
		// Whether the command got typed is not known: the next call looks
		// first. A call that ended (a client gone, aborted) takes what it
		// ran along, as a command of tool-bash would.
		sh.clean = false
		if ctx.Err() != nil {
			// The host closed the shell with the command (CloseOnCancel).
			sh.id = ""
		}
		return nil, err
	}
	r.out = out
	c := out.GetCaptured()
	sh.clean = false
	switch {
	case out.Wait == terminals.WaitMarker:
		r.ended, sh.clean = true, true
		r.status, _ = strconv.Atoi(strings.TrimSpace(c.GetRest()))
	case out.Wait == terminals.WaitSessionExit || out.GetSession().GetStatus() == "exited":
		p.forget(ctx, sh)
	case out.Wait == terminals.WaitTimeout:
		// The command keeps the shell: it goes, and all it ran.
		r.closed = true
		r.closeErr = p.forget(ctx, sh)
	default:
		// Its shell reads input again without the end marker: back at a
		// prompt (the command was interrupted, or exec'd another shell), or
		// a program waits for input. The next call looks.
		sh.clean = c.GetAtPrompt() && out.Wait == terminals.WaitStdinRead
	}
	return r, nil
}

// busyWait bounds how long a command waits for a terminal_send to the
// shell to end (a send waits at most terminals.MaxWait).
const busyWait = terminals.MaxWait + 5*time.Second

// unlessBusy calls send, again while the shell answers that a send of
// the model's (terminal_send) is in flight, up to busyWait: the command
// waits its turn behind it as behind another command.
func (p *persistent) unlessBusy(ctx context.Context, send func() (*terminals.Sent, error)) (*terminals.Sent, error) {
	deadline := time.Now().Add(busyWait)
	for {
		out, err := send()
		if !errors.Is(err, terminals.ErrSendActive) || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ready makes sure sh has a shell that takes a command: the one this
// plugin had, the agent's of this tool's name (a new process of this
// plugin), or a fresh one; a shell not back at its prompt is interrupted,
// and closed when that does not bring it back.
func (p *persistent) ready(ctx context.Context, sh *ownerShell, r *ran) error {
	if sh.id == "" {
		list, err := p.terms.List(ctx)
		if err != nil {
			return err
		}
		for _, s := range list {
			if s.Name == p.sessionName() && s.Status == "running" {
				sh.id, sh.clean = s.Id, false
			}
		}
	}
	if sh.id != "" && !sh.clean {
		switch back, err := p.backAtPrompt(ctx, sh.id); {
		case errors.Is(err, terminals.ErrNoSession):
			sh.id = ""
		case err != nil:
			return err
		case back == promptInterrupted:
			r.notes = append(r.notes, noteInterrupted)
		case back == promptNever:
			r.notes = append(r.notes, noteReplaced)
			if err := p.forget(ctx, sh); err != nil {
				return err
			}
		}
	}
	if sh.id == "" {
		s, err := p.terms.Open(ctx, &terminals.OpenRequest{Backend: p.cfg.Backend, Name: p.sessionName(), Cwd: p.cfg.Cwd, Cols: shellCols, Rows: shellRows})
		if err != nil {
			return err
		}
		sh.id, r.freshShell = s.Id, true
	}
	sh.clean = true
	return nil
}

// A shell's size: wide, so that a line a command prints is seldom folded
// by what reads the screen.
const (
	shellCols = 200
	shellRows = 50
)

// How a shell came back to its prompt.
type promptState int

const (
	promptThere       promptState = iota // it was there
	promptInterrupted                    // after a SIGINT to its foreground
	promptNever                          // not even then
)

// interruptWait bounds the wait for a prompt after a SIGINT.
const interruptWait = 2 * time.Second

// backAtPrompt looks whether session id is at its shell's prompt, and
// interrupts its foreground when it is not.
func (p *persistent) backAtPrompt(ctx context.Context, id string) (promptState, error) {
	o, err := p.terms.Read(ctx, id, 0, 100)
	if err != nil {
		return 0, err
	}
	if o.GetSession().GetStatus() == "exited" {
		return promptNever, nil
	}
	if o.AtPrompt {
		return promptThere, nil
	}
	if _, err := p.terms.Signal(ctx, id, "SIGINT", terminals.TargetForeground); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(interruptWait)
	for time.Now().Before(deadline) {
		o, err := p.terms.Read(ctx, id, 200*time.Millisecond, 100)
		if err != nil {
			return 0, err
		}
		if o.AtPrompt {
			return promptInterrupted, nil
		}
	}
	return promptNever, nil
}

// forget closes sh's shell (waiting until everything it ran is gone) and
// leaves sh without one.
func (p *persistent) forget(ctx context.Context, sh *ownerShell) error {
	id := sh.id
	sh.id, sh.clean = "", false
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if _, err := p.terms.Close(cctx, id); err != nil && !errors.Is(err, terminals.ErrNoSession) {
		return err
	}
	return nil
}

// closeTimeout bounds the close of a shell.
const closeTimeout = 15 * time.Second

// The markers around a command's output, with the call's nonce.
func startMarker(nonce string) string { return "__DSH_PERSISTENT_BASH_START_" + nonce + "__" }
func endMarker(nonce string) string   { return "__DSH_PERSISTENT_BASH_END_" + nonce + ":" }

func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// typedLine is what is typed for command: one line (however many the
// command has), which prints the start marker, runs the command in the
// shell itself (eval, so cd and exports stay) and prints the end marker
// with its status. The markers are assembled by printf from pieces, so the
// echoed line holds neither; the command travels as an ANSI-C quoted
// string, so no character of it means anything to the line editor or
// history expansion.
func typedLine(command, nonce string) string {
	return ` printf '%s_%s_%s__\n' __DSH_PERSISTENT_BASH START ` + nonce +
		`; eval ` + ansiQuote(command) +
		`; printf '\n%s_%s_%s:%s\n' __DSH_PERSISTENT_BASH END ` + nonce + ` "$?"`
}

// ansiQuote is s as a bash $'...' string: letters, digits and a few safe
// marks as they are, every other byte as \xHH.
func ansiQuote(s string) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + 3)
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte(" ,./:=@_+-%", c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// captureBytes is what the host keeps of a command's output for a budget
// of chars characters: enough for the last lines within it however wide
// their characters, and the head the host keeps besides.
func captureBytes(chars int) int { return 2 * 4 * (chars + 1024) }

func main() { sdk.Serve(&persistent{}) }
