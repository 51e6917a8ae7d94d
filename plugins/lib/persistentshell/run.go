package persistentshell

import (
	"context"
	"errors"
	"time"

	"github.com/dshrun/dsh/core/terminals"
)

// ran is one command's end, for the model.
type ran struct {
	out        *terminals.Sent
	timeoutMs  int64
	interrupt  string   // the interrupt as the model reads it
	notes      []string // what happened to the shell first
	closed     bool     // the shell was closed after the command (timeout)
	closeErr   error
	status     int  // the exit status, when ended
	ended      bool // the end marker came
	freshShell bool // the command ran in a shell started for it
	// untrusted: the shell gave no true end for the command, and was
	// closed.
	untrusted bool
	// promptLast: the output's last line is the shell's prompt (a line
	// cut short), not the command's.
	promptLast bool
}

// run runs command in sh's shell, starting one when there is none (or the
// one there cannot take a command), within timeoutMs.
func (p *persistent) run(ctx context.Context, sh *ownerShell, command string, timeoutMs int64) (*ran, error) {
	r := &ran{timeoutMs: timeoutMs, interrupt: p.interrupt()}
	if err := p.ready(ctx, sh, r); err != nil {
		return nil, err
	}
	started := time.Now()
	typed := p.plugin.Dialect.Type(command, Nonces{Start: NewNonce(), End: NewNonce()})
	send := func() (*terminals.Sent, error) {
		return p.unlessBusy(ctx, func() (*terminals.Sent, error) {
			return p.terms.Send(ctx, &terminals.SendRequest{
				Id:     sh.id,
				Text:   typed.Text,
				Submit: true,
				WaitMs: timeoutMs,
				Capture: &terminals.Capture{
					From:          typed.From,
					Until:         typed.Until,
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
		return nil, p.lost(ctx, sh, err)
	}
	r.out = out
	c := out.GetCaptured()
	sh.clean = false
	status, trusted := 0, false
	if out.Wait == terminals.WaitMarker {
		status, trusted = p.plugin.Dialect.Status(c.GetRest())
	}
	cutShort := out.Wait == terminals.WaitStdinRead && c.GetAtPrompt() && c.GetStarted() && p.shell.CutShort && typed.Confirm != nil
	switch {
	case out.Wait == terminals.WaitMarker && !trusted:
		// The command was not run as typed: the shell can no longer be
		// trusted with one.
		r.untrusted = true
		r.closeErr = p.forget(ctx, sh)
	case out.Wait == terminals.WaitMarker || cutShort:
		if typed.Confirm != nil {
			var err error
			status, trusted, err = p.confirm(ctx, sh, *typed.Confirm, timeoutMs-time.Since(started).Milliseconds())
			if err != nil && ctx.Err() != nil {
				return nil, p.lost(ctx, sh, err)
			}
			if err != nil || !trusted {
				// The command ran: its output is shown, not an error
				// that could make the model run it again; how it
				// ended is not known, so the shell goes.
				r.untrusted = true
				r.closeErr = p.forget(ctx, sh)
				return r, nil
			}
		}
		r.ended, sh.clean = true, true
		r.status, r.promptLast = status, cutShort
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
		// that interrupted its own shell, in a shell that does not cut
		// lines short of itself), or the prompt was printed by the command
		// itself. How the command ended is not known, nor whether the
		// shell runs the next line as typed: it goes.
		r.untrusted = true
		r.closeErr = p.forget(ctx, sh)
	default:
		// A program waits for input, or is stopped: the next call
		// interrupts it first.
	}
	return r, nil
}

// lost is err, a send that failed, after what it leaves of sh: whether the
// command got typed is not known, so the next call looks first. A call
// that ended (a client gone, aborted) takes what it ran along, as a
// command of tool-bash would.
func (p *persistent) lost(ctx context.Context, sh *ownerShell, err error) error {
	sh.clean = false
	if ctx.Err() != nil {
		// The host closed the shell with the command (CloseOnCancel).
		sh.id = ""
	}
	return err
}

// confirmWait is the least a confirming line is given: it runs at once in
// a shell back at its prompt, however little is left of the call's time.
const confirmWait = 10 * time.Second

// confirm types line, the dialect's proof that the command has ended
// (the end marker just seen was its true end, or the shell cut the line
// short), and returns the command's status and whether it proved it: its
// end came right after its start, with a status the dialect reads. leftMs
// is what is left of the call's time.
func (p *persistent) confirm(ctx context.Context, sh *ownerShell, line Line, leftMs int64) (int, bool, error) {
	out, err := p.unlessBusy(ctx, func() (*terminals.Sent, error) {
		return p.terms.Send(ctx, &terminals.SendRequest{
			Id:     sh.id,
			Text:   line.Text,
			Submit: true,
			WaitMs: max(leftMs, confirmWait.Milliseconds()),
			Capture: &terminals.Capture{
				From:          line.From,
				Until:         line.Until,
				CloseOnCancel: true,
			},
		})
	})
	if err != nil {
		return 0, false, err
	}
	c := out.GetCaptured()
	if out.Wait != terminals.WaitMarker || !c.GetStarted() || len(c.GetData()) != 0 {
		return 0, false, nil
	}
	status, ok := p.plugin.Dialect.Status(c.GetRest())
	return status, ok, nil
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
			r.notes = append(r.notes, noteInterrupted(r.interrupt))
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
		if d := p.shell.Dialect; d != "" && s.Dialect != d {
			err := p.forget(ctx, sh)
			return errors.Join(errWrongDialect{backend: s.Backend, speaks: s.Dialect, want: d}, err)
		}
		if len(r.notes) == 0 {
			// A shell of this session's may have been lost unseen (this
			// plugin restarted, its shell closed with the call it ran): a
			// fresh one is said, always.
			r.notes = append(r.notes, noteFresh)
		}
		if p.shell.AwaitPrompt {
			if err := p.awaitPrompt(ctx, sh.id); err != nil {
				return err
			}
		}
	}
	sh.clean = true
	return nil
}

// errWrongDialect: the backend's shell speaks another language than the
// tool types.
type errWrongDialect struct{ backend, speaks, want string }

func (e errWrongDialect) Error() string {
	return "the terminal backend " + e.backend + " starts " + e.speaks + " shells, and this tool needs a " + e.want + " one (name a " + e.want + " backend in the tool's config)"
}

// A shell's size: wide, so that a line a command prints is seldom folded
// by what reads the screen.
const (
	shellCols = 200
	shellRows = 50
)

// promptWait bounds the wait for a fresh shell's first prompt.
const promptWait = 30 * time.Second

// awaitPrompt waits until session id's fresh shell shows its prompt, or
// has exited (the command's run then says so), or promptWait has passed
// (the run then waits for the shell to take the line).
func (p *persistent) awaitPrompt(ctx context.Context, id string) error {
	deadline := time.Now().Add(promptWait)
	for time.Now().Before(deadline) {
		o, err := p.terms.Read(ctx, id, 200*time.Millisecond, 100)
		if err != nil {
			return err
		}
		if o.AtPrompt || o.GetSession().GetStatus() == "exited" {
			return nil
		}
	}
	return nil
}

// How a shell came back to its prompt.
type promptState int

const (
	promptThere       promptState = iota // it was there
	promptInterrupted                    // after an interrupt of its foreground
	promptNever                          // not even then
)

// interruptWait bounds the wait for a prompt after an interrupt.
const interruptWait = 2 * time.Second

// interrupt is the interrupt as the model reads it.
func (p *persistent) interrupt() string {
	if p.shell.Interrupt != "" {
		return p.shell.Interrupt
	}
	return "SIGINT"
}

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
	if keys := p.shell.InterruptKeys; keys != "" {
		_, err = p.unlessBusy(ctx, func() (*terminals.Sent, error) {
			return p.terms.Send(ctx, &terminals.SendRequest{Id: id, Text: keys})
		})
	} else {
		_, err = p.terms.Signal(ctx, id, "SIGINT", terminals.TargetForeground)
	}
	if err != nil {
		return 0, err
	}
	// The prompt counts once printed after the interrupt: a line typed
	// before the shell took it could lose what it had read of it.
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
