// Command dsh-tool-bash-persistent is a persistent bash tool: it registers
// one tool (`bash` unless its config names another) with ctx.tools and runs
// each command in a shell of the calling agent's own that lives on between
// calls, a ctx.terminals session (so the working directory, variables and
// functions carry over, and the shell shows in terminal_list). An agent's
// calls run one at a time. Each command is typed in a line that frames it
// with a start and an end marker, each with a fresh nonce, written by a
// program nothing the shell defines can reach (see typedLine); ctx.terminals
// waits for the end marker and returns what came between. A shell that
// gives no true end is closed and replaced, and a fresh shell is always
// said. It owns every word the model reads about these commands.
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
	// untrusted: the shell gave no true end for the command, and was
	// closed.
	untrusted bool
}

// run runs command in sh's shell, starting one when there is none (or the
// one there cannot take a command), within timeoutMs.
func (p *persistent) run(ctx context.Context, sh *ownerShell, command string, timeoutMs int64) (*ran, error) {
	r := &ran{timeoutMs: timeoutMs}
	if err := p.ready(ctx, sh, r); err != nil {
		return nil, err
	}
	startNonce, endNonce := newNonce(), newNonce()
	send := func() (*terminals.Sent, error) {
		return p.unlessBusy(ctx, func() (*terminals.Sent, error) {
			return p.terms.Send(ctx, &terminals.SendRequest{
				Id:     sh.id,
				Text:   typedLine(command, startNonce, endNonce),
				Submit: true,
				WaitMs: timeoutMs,
				Capture: &terminals.Capture{
					From:          startMarker(startNonce),
					Until:         endMarker(endNonce),
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
	case out.Wait == terminals.WaitMarker && c.GetRest() == lostStatus:
		// The command was not run by the shell's eval: the shell can no
		// longer be trusted with one.
		r.untrusted = true
		r.closeErr = p.forget(ctx, sh)
	case out.Wait == terminals.WaitMarker:
		r.ended, sh.clean = true, true
		r.status, _ = strconv.Atoi(strings.TrimSpace(c.GetRest()))
	case out.Wait == terminals.WaitSessionExit || out.GetSession().GetStatus() == "exited":
		p.forget(ctx, sh)
	case out.Wait == terminals.WaitTimeout:
		// The command keeps the shell: it goes, and all it ran.
		r.closed = true
		r.closeErr = p.forget(ctx, sh)
	case out.Wait == terminals.WaitStdinRead && (c.GetAtPrompt() || !c.GetStarted()):
		// The shell reads its input again, and the line that ran the
		// command gave no end, or not even a start: it was cut short (a
		// readonly variable or a disabled builtin of the line's, a command
		// that interrupted its own shell), or the prompt was printed by
		// the command itself. How the command ended is not known, nor
		// whether the shell runs the next line as typed: it goes.
		r.untrusted = true
		r.closeErr = p.forget(ctx, sh)
	default:
		// A program waits for input, or is stopped: the next call
		// interrupts it first.
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
		if len(r.notes) == 0 {
			// A shell of this session's may have been lost unseen (this
			// plugin restarted, its shell closed with the call it ran): a
			// fresh one is said, always.
			r.notes = append(r.notes, noteFresh)
		}
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

// backAtPrompt brings session id back to its shell's prompt: its
// foreground is interrupted whether or not the prompt shows, for a
// command may print the prompt's mark itself and wait for input, which
// would take the next line.
func (p *persistent) backAtPrompt(ctx context.Context, id string) (promptState, error) {
	o, err := p.terms.Read(ctx, id, 0, 100)
	if err != nil {
		return 0, err
	}
	if o.GetSession().GetStatus() == "exited" {
		return promptNever, nil
	}
	was := promptInterrupted
	if o.AtPrompt {
		was = promptThere
	}
	if _, err := p.terms.Signal(ctx, id, "SIGINT", terminals.TargetForeground); err != nil {
		return 0, err
	}
	// The prompt counts once printed after the SIGINT: a line typed
	// before the shell took the signal could lose what it had read of it.
	deadline := time.Now().Add(interruptWait)
	for time.Now().Before(deadline) {
		o, err := p.terms.Read(ctx, id, 200*time.Millisecond, 100)
		if err != nil {
			return 0, err
		}
		if len(o.Data) > 0 && o.AtPrompt {
			return was, nil
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

// The markers around a command's output, with the call's nonces.
func startMarker(nonce string) string { return "__DSH_PERSISTENT_BASH_START_" + nonce + "__" }
func endMarker(nonce string) string   { return "__DSH_PERSISTENT_BASH_END_" + nonce + ":" }

// lostStatus is what the end marker carries in place of a status when the
// command was not run by the shell's own eval (a function or a disabled
// builtin stood in its way).
const lostStatus = "lost"

func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// typedLine is what is typed for command: one line (however many the
// command has) whose words no alias, function or disabled builtin of the
// shell can take over, or only so that the call fails rather than lies:
//
//   - POSIXLY_CORRECT=1 (an assignment: nothing to look up) puts bash in
//     posix mode, where eval, set, unset and exec, special builtins, are
//     found before any function; a readonly POSIXLY_CORRECT aborts the line
//     before the command, and no end marker comes. HISTSIZE=0 keeps the
//     line from the history (and empties it).
//   - The start marker is bash's own message for an unset variable
//     (${v?word}) in a subshell, with no command to look up; the quotes
//     that split it in the typed line are gone from the message. It need
//     not be secret: it only says where the output starts.
//   - eval runs, as its first words, the leaving of posix mode and the
//     emptying of __dsh_lost, then the command itself in the shell (so cd
//     and exports stay). An eval that is not the builtin (disabled)
//     leaves __dsh_lost as it was, and the end marker carries it in
//     place of a status.
//   - The end marker is printed from a subshell, which takes no DEBUG
//     trap (and drops the one functrace or extdebug hands it), in posix
//     mode again, where no function printf is left and PATH is empty: the
//     builtin printf prints it, or nothing does (a disabled printf is not
//     replaced by a program, whose command line would show the nonce). It
//     goes to the terminal the shell reads from, whatever the command
//     redirected. A readonly status variable, or a disabled unset, cuts
//     the subshell short, and no end marker comes.
//   - The line ends by putting verbose mode and the history off again,
//     and the shell's stderr back on the terminal (the line editor echoes
//     what is typed, and prints the prompt, there): the next line, and its
//     nonce, is shown nowhere but on the terminal. A command's stdout
//     redirection (exec >file) stays.
//
// The end nonce is typed only in the end marker's printf, after the
// command: the command finds it in no variable, function, history,
// environment or command line. The markers are assembled from pieces (by
// quote removal, by printf), so the echoed line holds neither.
func typedLine(command, startNonce, endNonce string) string {
	return ` POSIXLY_CORRECT=1;HISTSIZE=0;__dsh_lost=` + lostStatus + `;` +
		`\unset __dsh_start;("${__dsh_start?__DSH_PERSISTENT''_BASH_START_` + startNonce + `__}") 2>&0||__dsh_start=;` +
		`\eval ` + ansiQuote("\\unset POSIXLY_CORRECT;__dsh_lost=\n"+command) +
		`;(__dsh_status=$?;POSIXLY_CORRECT=1;\trap - DEBUG RETURN;\set +vx;\unset -f printf;PATH=;` +
		`\printf '\n%s_%s_%s:%s\n' __DSH_PERSISTENT_BASH END ` + endNonce + ` "${__dsh_lost:-$__dsh_status}") >&0 2>/dev/null` +
		`;POSIXLY_CORRECT=1;\set +v;\exec 2>&0;HISTSIZE=0;\unset POSIXLY_CORRECT`
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
