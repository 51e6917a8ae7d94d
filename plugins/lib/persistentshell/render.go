package persistentshell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
	"github.com/dshrun/dsh/sdk/modeltext"
)

// What happened to the shell before a command, said first.
const (
	noteReplaced = "[the previous command did not give the shell back: that shell was closed, and this command runs in a fresh one (working directory and variables reset)]"
	noteGone     = "[the shell was closed since the last command: this command runs in a fresh one (working directory and variables reset)]"
	noteFresh    = "[this command runs in a fresh shell (working directory and variables as a new shell has them)]"
)

// noteInterrupted says the previous command was interrupted (by
// interrupt, as the model reads it) before this one.
func noteInterrupted(interrupt string) string {
	return "[the previous command was still running: it was interrupted (" + interrupt + ") first]"
}

// facts are a result's structured content.
type facts struct {
	SessionID    string `json:"sessionId,omitempty"`
	ExitCode     *int   `json:"exitCode,omitempty"`
	Ended        bool   `json:"ended"`
	Wait         string `json:"wait"`
	WaitDetail   string `json:"waitDetail,omitempty"`
	TimedOut     bool   `json:"timedOut,omitempty"`
	ShellExited  bool   `json:"shellExited,omitempty"`
	ShellClosed  bool   `json:"shellClosed,omitempty"`
	FreshShell   bool   `json:"freshShell,omitempty"`
	Untrusted    bool   `json:"untrusted,omitempty"`
	Truncated    bool   `json:"truncated"`
	OmittedBytes int64  `json:"omittedBytes,omitempty"`
	OmittedLines int64  `json:"omittedLines,omitempty"`
	Dropped      int64  `json:"droppedBytes,omitempty"`
}

// result is r for the model within chars characters of output: what
// happened to the shell first, what the command printed (its last lines),
// then how it ended.
func (r *ran) result(chars int) *toolsv1.CallResult {
	text, f := r.render(chars)
	b, _ := json.Marshal(f)
	return &toolsv1.CallResult{Text: text, Structured: b, IsError: r.failed()}
}

// failed reports whether r's result is an error: its text ends with an
// exit code, a timeout, an exit of the shell other than 0, or a shell
// that gave no true end (or could not be closed). A command that has no
// end yet (it waits for input, or is stopped) has not failed.
func (r *ran) failed() bool {
	switch s := r.out.GetSession(); {
	case r.untrusted, r.closed, r.closeErr != nil:
		return true
	case r.ended:
		return r.status != 0
	case r.out.Wait == terminals.WaitSessionExit || s.GetStatus() == "exited":
		return s.GetSignal() != "" || s.ExitCode == nil || *s.ExitCode != 0
	}
	return false
}

func (r *ran) render(chars int) (string, facts) {
	out, c := r.out, r.out.GetCaptured()
	f := facts{SessionID: out.GetSession().GetId(), Ended: r.ended, Wait: out.Wait, WaitDetail: out.WaitDetail, FreshShell: r.freshShell, Dropped: c.GetDropped()}
	data := c.GetData()
	if !c.GetStarted() {
		// Not the command's: the typed line's echo, and what came before
		// the line ran, if it did.
		data = nil
	}
	if r.promptLast {
		// The shell's prompt, on a line of its own: not the command's.
		data = data[:bytes.LastIndexByte(data, '\n')+1]
	}
	if r.ended {
		// The end marker's line starts with a newline of its own.
		data = bytes.TrimSuffix(data, []byte("\n"))
		data = bytes.TrimSuffix(data, []byte("\r"))
	}
	v := modeltext.TailView(data, chars, c.GetOmitted() > 0)
	f.OmittedBytes = c.GetOmitted() + v.OmittedBytes
	f.OmittedLines = v.OmittedLines
	f.Truncated = f.OmittedBytes > 0 || c.GetDropped() > 0
	lines := append([]string(nil), r.notes...)
	if f.Truncated {
		lines = append(lines, cutNotice(f, c.GetOmitted() > 0))
	}
	body := strings.TrimSuffix(string(v.Text), "\n")
	if body != "" {
		lines = append(lines, body)
	}
	switch {
	case r.untrusted:
		f.Untrusted, f.ShellClosed = true, r.closeErr == nil
		lines = append(lines, "[the shell did not report how the command ended (its line was cut short, or something the command defined or disabled stood in the way), so its results cannot be trusted: the shell was closed"+closedHow(r.closeErr)+"; the next command starts in a fresh shell (working directory and variables reset)]")
	case r.ended:
		f.ExitCode = &r.status
		if m := strings.TrimPrefix(shell.ExitMarker(r.status, ""), "\n"); m != "" {
			lines = append(lines, m)
		}
	case out.Wait == terminals.WaitSessionExit || out.GetSession().GetStatus() == "exited":
		f.ShellExited = true
		lines = append(lines, "[the shell exited"+exitedHow(out.GetSession())+": the next command starts in a fresh shell (working directory and variables reset)]")
	case r.closed:
		f.TimedOut, f.ShellClosed = true, r.closeErr == nil
		if r.closeErr != nil {
			lines = append(lines, fmt.Sprintf("[timed out after %dms; the shell could not be closed: %s]", r.timeoutMs, sentence(r.closeErr)))
		} else {
			lines = append(lines, fmt.Sprintf("[timed out after %dms: the shell was closed with everything it ran; the next command starts in a fresh shell (working directory and variables reset)]", r.timeoutMs))
		}
	case out.Wait == terminals.WaitStdinRead:
		lines = append(lines, "[no end yet: the command waits for input ("+out.WaitDetail+"); this tool cannot type to it, so the next command interrupts it ("+r.interrupt+") first. Give such commands their input (a pipe, a here-document, a flag)]")
	default:
		lines = append(lines, "[no end yet: the command is stopped ("+out.WaitDetail+"); the next command interrupts it ("+r.interrupt+") first]")
	}
	if len(lines) == 0 {
		return "", f
	}
	return strings.Join(lines, "\n"), f
}

// closedHow is what a failed close adds to the word closed.
func closedHow(err error) string {
	if err == nil {
		return ""
	}
	return " (or tried to be: " + sentence(err) + ")"
}

func exitedHow(s *terminals.Session) string {
	switch {
	case s.GetSignal() != "":
		return " (ended by " + s.GetSignal() + ")"
	case s.ExitCode != nil:
		return fmt.Sprintf(" with code %d", *s.ExitCode)
	}
	return ""
}

// cutNotice says what of the output is not shown.
func cutNotice(f facts, middle bool) string {
	s := "[output truncated: " + modeltext.Thousands(f.OmittedBytes) + " bytes"
	if !middle && f.OmittedLines > 0 {
		s += " (" + plural(f.OmittedLines, "line") + ")"
	}
	s += " omitted before the last lines"
	if f.Dropped > 0 {
		s += ", and " + modeltext.Thousands(f.Dropped) + " bytes the terminal could not hold"
	}
	return s + "]"
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return modeltext.Thousands(n) + " " + word + "s"
}

// errorResult is a call that could not run its command: one bracketed
// sentence.
func errorResult(sentence string) *toolsv1.CallResult {
	b, _ := json.Marshal(map[string]string{"error": sentence})
	return &toolsv1.CallResult{Text: "[" + sentence + "]", Structured: b, IsError: true}
}

// sentence is err in plain words.
func sentence(err error) string {
	var e *sdk.Error
	switch {
	case errors.Is(err, terminals.ErrTooMany):
		return fmt.Sprintf("the shell cannot be started: this session holds %d terminals, the most it may (close one with terminal_close)", terminals.MaxPerOwner)
	case errors.Is(err, terminals.ErrDuplicateName):
		return "the shell cannot be started: a terminal of this session has its name (close it with terminal_close)"
	case errors.Is(err, terminals.ErrSendActive):
		return "the shell is busy with a terminal_send: wait for it, then try again"
	case errors.Is(err, terminals.ErrNoBackend):
		return "no shell is available here"
	case errors.Is(err, terminals.ErrOwnerNotLive):
		return "this session has ended: its shell was closed"
	case errors.Is(err, terminals.ErrServiceDisposing):
		return "dsh is shutting down: its shells are being closed"
	case errors.Is(err, context.Canceled):
		return "aborted"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, sdk.ErrDeadline):
		return "the call ran out of time"
	case errors.Is(err, sdk.ErrProviderGone):
		return "the shell's terminal service is restarting: try again"
	case errors.As(err, &e):
		return strings.TrimSuffix(e.Msg, ".")
	}
	return err.Error()
}
