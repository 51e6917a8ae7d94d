package termsessions

import (
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions/screen"
)

// Screen is what may watch a session's terminal in the host: a terminal
// emulator fed with its output (Terminal.Observe) that answers the
// program's queries through Terminal.Input, told of each resize and closed
// with the session (a *screen.Screen of host/termsessions/screen is
// one).
type Screen interface {
	Resize(cols, rows int)
	Close() error
}

// Viewer is a Screen a model can look at: a *screen.Screen's Read (the
// viewport, then the unread scrollback within budget characters).
type Viewer interface {
	Read(budget int) screen.Read
}

// AttachScreen attaches a screen.Screen to session id's terminal: fed
// with its output, answering its queries through the terminal's input.
// When the emulator fails on what the program printed (the screen is then
// reset, and the model told), log says so at warn.
func AttachScreen(id string, t *procs.Terminal, log hclog.Logger) Screen {
	cols, rows := t.Size()
	sc := screen.New(cols, rows, t.Input())
	sc.OnReset(logReset(log, id))
	t.Observe(sc)
	return sc
}

// logReset logs a reset of session id's screen. The stack is where the
// emulator failed: what a report of its fault needs.
func logReset(log hclog.Logger, id string) func(screen.Failure) {
	return func(f screen.Failure) {
		log.Warn("a terminal's screen was reset: its emulator failed", "session", id, "during", f.Op, "panic", fmt.Sprint(f.Panic), "stack", string(f.Stack))
	}
}

// look is the session's screen within budget characters, if it has one.
func (m *Manager) look(s *Session, budget int) (screen.Read, bool) {
	v, ok := s.screen.(Viewer)
	if !ok {
		return screen.Read{}, false
	}
	if budget <= 0 {
		budget = terminals.DefaultBudget
	}
	return v.Read(budget), true
}
