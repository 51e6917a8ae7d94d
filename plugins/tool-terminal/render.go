package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/sdk"
	"github.com/dshrun/dsh/sdk/modeltext"
)

// facts are a result's structured content: what its text says, as data.
type facts struct {
	Session    *sessionFact   `json:"session,omitempty"`
	Sessions   []*sessionFact `json:"sessions,omitempty"`
	Wait       string         `json:"wait,omitempty"`
	WaitDetail string         `json:"waitDetail,omitempty"`
	Screen     *screenFact    `json:"screen,omitempty"`
	Delivered  *bool          `json:"delivered,omitempty"`
}

type sessionFact struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Cwd      string `json:"cwd,omitempty"`
	Cols     uint32 `json:"cols"`
	Rows     uint32 `json:"rows"`
	Status   string `json:"status"`
	ExitCode *int32 `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
}

type screenFact struct {
	Viewport               string `json:"viewport"`
	ViewportOmittedLines   int64  `json:"viewportOmittedLines,omitempty"`
	ViewportOmittedChars   int64  `json:"viewportOmittedChars,omitempty"`
	Scrollback             string `json:"scrollback,omitempty"`
	ScrollbackOmittedLines int64  `json:"scrollbackOmittedLines,omitempty"`
	ScrollbackOmittedChars int64  `json:"scrollbackOmittedChars,omitempty"`
	AltScreen              bool   `json:"altScreen,omitempty"`
	Title                  string `json:"title,omitempty"`
}

func sessionFacts(s *terminals.Session) *sessionFact {
	if s == nil {
		return nil
	}
	return &sessionFact{ID: s.Id, Name: s.Name, Cwd: s.Cwd, Cols: s.Cols, Rows: s.Rows, Status: s.Status, ExitCode: s.ExitCode, Signal: s.Signal}
}

// clean is model text through the cleaner: the screen is plain already,
// but a title or a scrollback line may carry what a program printed.
func clean(s string) string {
	b, _ := modeltext.Clean([]byte(s))
	return string(b)
}

func screenFacts(sc *terminals.Screen) *screenFact {
	if sc == nil {
		return nil
	}
	return &screenFact{
		Viewport:               clean(sc.Viewport),
		ViewportOmittedLines:   sc.ViewportOmittedLines,
		ViewportOmittedChars:   sc.ViewportOmittedChars,
		Scrollback:             clean(sc.Scrollback),
		ScrollbackOmittedLines: sc.ScrollbackOmittedLines,
		ScrollbackOmittedChars: sc.ScrollbackOmittedChars,
		AltScreen:              sc.AltScreen,
		Title:                  clean(sc.Title),
	}
}

func sentFacts(r *terminals.Sent) facts {
	return facts{Session: sessionFacts(r.Session), Wait: r.Wait, WaitDetail: r.WaitDetail, Screen: screenFacts(r.Screen)}
}

func readFacts(o *terminals.Output) facts {
	return facts{Session: sessionFacts(o.Session), Screen: screenFacts(o.Screen)}
}

// renderScreen is what the model reads of a screen: the scrollback it has
// not seen (older first), the viewport, then a line for each omission.
func renderScreen(b *strings.Builder, sc *screenFact) {
	if sc == nil {
		return
	}
	if sc.Scrollback != "" {
		b.WriteString(sc.Scrollback)
		b.WriteString("[the screen now:]\n")
	}
	if sc.Viewport != "" {
		b.WriteString(sc.Viewport)
		b.WriteByte('\n')
	} else {
		b.WriteString("[the screen is blank]\n")
	}
	if sc.ScrollbackOmittedLines > 0 || sc.ScrollbackOmittedChars > 0 {
		fmt.Fprintf(b, "[scrollback: %s (%s) not shown]\n", plural(sc.ScrollbackOmittedLines, "line"), plural(sc.ScrollbackOmittedChars, "character"))
	}
	if sc.ViewportOmittedLines > 0 || sc.ViewportOmittedChars > 0 {
		fmt.Fprintf(b, "[screen: top %s (%s) not shown]\n", plural(sc.ViewportOmittedLines, "line"), plural(sc.ViewportOmittedChars, "character"))
	}
	if sc.AltScreen {
		b.WriteString("[a full-screen program is showing]\n")
	}
}

// renderExit is the session's end, when it ended.
func renderExit(b *strings.Builder, s *terminals.Session) {
	if s == nil || s.Status != "exited" {
		return
	}
	switch {
	case s.Signal != "":
		fmt.Fprintf(b, "[session %s ended by %s: close it with terminal_close]\n", s.Id, s.Signal)
	case s.ExitCode != nil:
		fmt.Fprintf(b, "[session %s exited with code %d: close it with terminal_close]\n", s.Id, *s.ExitCode)
	default:
		fmt.Fprintf(b, "[session %s exited: close it with terminal_close]\n", s.Id)
	}
}

// exitedBadly reports whether s's shell ended other than with code 0: a
// result that says so (renderExit) is an error, as a command's non-zero
// exit is.
func exitedBadly(s *terminals.Session) bool {
	return s != nil && s.Status == "exited" && (s.Signal != "" || s.ExitCode == nil || *s.ExitCode != 0)
}

func renderSent(r *terminals.Sent) string {
	var b strings.Builder
	renderScreen(&b, screenFacts(r.Screen))
	if r.Wait != "" && r.Wait != terminals.WaitSessionExit {
		fmt.Fprintf(&b, "[wait: %s — %s]\n", r.Wait, clean(r.WaitDetail))
	}
	renderExit(&b, r.Session)
	return strings.TrimSuffix(b.String(), "\n")
}

func renderRead(o *terminals.Output) string {
	var b strings.Builder
	renderScreen(&b, screenFacts(o.Screen))
	renderExit(&b, o.Session)
	return strings.TrimSuffix(b.String(), "\n")
}

func renderOpened(s *terminals.Session) string {
	name := ""
	if s.Name != "" {
		name = " (" + s.Name + ")"
	}
	return fmt.Sprintf("[terminal %s%s open: %s in %s, %d×%d; type into it with terminal_send]", s.Id, name, s.Dialect, s.Cwd, s.Cols, s.Rows)
}

func renderSignalled(r *terminals.Signalled, signal, target string) string {
	who := "the program in front of " + r.Session.GetId()
	if target == "shell" {
		who = "the shell of " + r.Session.GetId()
	}
	var b strings.Builder
	if r.Delivered {
		fmt.Fprintf(&b, "[%s sent to %s; look at the result with terminal_read]\n", signal, who)
	} else {
		fmt.Fprintf(&b, "[nothing to signal: the shell of %s has ended]\n", r.Session.GetId())
	}
	renderExit(&b, r.Session)
	return strings.TrimSuffix(b.String(), "\n")
}

func renderClosed(s *terminals.Session) string {
	return fmt.Sprintf("[terminal %s closed: everything that ran in it has ended]", s.Id)
}

func renderList(list []*terminals.Session) string {
	if len(list) == 0 {
		return "[no terminals open]"
	}
	var b strings.Builder
	for _, s := range list {
		name := s.Name
		if name == "" {
			name = "-"
		}
		state := s.Status
		if s.Status == "exited" && s.ExitCode != nil {
			state = "exited " + strconv.Itoa(int(*s.ExitCode))
		} else if s.Signal != "" {
			state = "ended by " + s.Signal
		}
		fmt.Fprintf(&b, "%s  %s  %s  %d×%d  %s\n", s.Id, name, state, s.Cols, s.Rows, s.Cwd)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// maxNamed is how many of the caller's terminals a sentence names.
const maxNamed = 8

// noTerminal says given names none of the caller's terminals, and which
// there are.
func noTerminal(given string, mine []*terminals.Session) string {
	if len(mine) == 0 {
		return fmt.Sprintf("no terminal %s in this session: none is open (terminal_open opens one)", given)
	}
	return fmt.Sprintf("no terminal %s in this session; the open ones: %s", given, named(mine))
}

// ambiguous says given names several of the caller's terminals.
func ambiguous(given string, found []*terminals.Session) string {
	return fmt.Sprintf("%s could be any of %s: give the id", given, named(found))
}

// named lists terminals by id, each with its name if it has one.
func named(list []*terminals.Session) string {
	var b strings.Builder
	for i, s := range list {
		if i == maxNamed {
			fmt.Fprintf(&b, ", and %d more (terminal_list)", len(list)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Id)
		if s.Name != "" {
			fmt.Fprintf(&b, " (named %s)", s.Name)
		}
	}
	return b.String()
}

func killRefusal(id string) string {
	return fmt.Sprintf("SIGKILL would end the shell of %s: close the terminal instead (terminal_close waits until everything in it has ended)", id)
}

// failed is a refused or failed call as one bracketed sentence in plain
// words: the taxonomy of ctx.terminals mapped to what the model can do.
func failed(err error, id string) *toolsv1.CallResult {
	return errorResult(sentence(err, id))
}

func sentence(err error, id string) string {
	var e *sdk.Error
	switch {
	case errors.Is(err, terminals.ErrNoSession), errors.Is(err, terminals.ErrForeignSession):
		return fmt.Sprintf("no terminal %s in this session", id)
	case errors.Is(err, terminals.ErrSendActive):
		return fmt.Sprintf("a command is still running in %s: wait for it (terminal_read) or interrupt it (terminal_signal SIGINT)", id)
	case errors.Is(err, terminals.ErrTooMany):
		return fmt.Sprintf("at most %d terminals per session: close one first", terminals.MaxPerOwner)
	case errors.Is(err, terminals.ErrDuplicateName):
		return "a terminal by that name is open already: choose another name, or close it"
	case errors.Is(err, terminals.ErrNoBackend):
		return "no terminal shell is available here"
	case errors.Is(err, terminals.ErrOwnerNotLive):
		return "this session has ended: its terminals were closed"
	case errors.Is(err, terminals.ErrServiceDisposing):
		return "dsh is shutting down: its terminals are being closed"
	case errors.Is(err, terminals.ErrShellKill):
		return killRefusal(id)
	case errors.Is(err, terminals.ErrInvalid):
		return strings.TrimSuffix(err.Error(), ".")
	case errors.Is(err, context.Canceled):
		return "aborted"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, sdk.ErrDeadline):
		return "the call ran out of time"
	case errors.Is(err, sdk.ErrProviderGone):
		return "the terminals are restarting: try again"
	case errors.As(err, &e):
		return e.Msg
	}
	return err.Error()
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return modeltext.Thousands(n) + " " + word + "s"
}
