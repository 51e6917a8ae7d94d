package termsessions

import (
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
)

// modelSignal is a signal the model may send, or why not.
func modelSignal(name string) (syscall.Signal, error) {
	if !slices.Contains(terminals.Signals, name) {
		return 0, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("signal %q: one of %s", name, strings.Join(terminals.Signals, ", ")))
	}
	sig, err := procs.TerminalSignal(name)
	if err != nil {
		return 0, terminals.Errorf(terminals.ErrInvalid, err.Error())
	}
	return sig, nil
}

// errShellKill refuses a SIGKILL that would end the shell: Close does,
// and waits until every process of the session is gone.
func errShellKill(id string) error {
	return terminals.Errorf(terminals.ErrShellKill, fmt.Sprintf("SIGKILL for the shell of session %s is refused: close the session to end it (close waits until every process of it is gone)", id))
}

// interrupts reports whether sig is one a terminal's keys send (Ctrl-C,
// Ctrl-Z), which discard the input typed and not read yet.
func interrupts(name string) bool { return name == "SIGINT" || name == "SIGTSTP" }

// signal delivers sig to the session's foreground process group or its
// shell; SIGINT and SIGTSTP for the foreground discard the unread input
// first.
func (m *Manager) signal(s *Session, name string, shell bool) (bool, error) {
	sig, err := modelSignal(name)
	if err != nil {
		return false, err
	}
	if sig == syscall.SIGKILL {
		if shell {
			return false, errShellKill(s.ID)
		}
		// At its prompt the shell is the foreground: the same refusal.
		if fg, err := s.term.Foreground(); err == nil && fg == s.term.Pid() {
			return false, errShellKill(s.ID)
		}
	}
	var ok bool
	if interrupts(name) && !shell {
		// As its keys do in a terminal: what was typed ahead of the
		// program goes with it.
		_, ok, err = s.term.Interrupt(sig)
	} else {
		_, ok, err = s.term.Signal(sig, shell)
	}
	if err != nil {
		return false, fmt.Errorf("terminal session %s: %w", s.ID, err)
	}
	return ok, nil
}

// Signal sends signal to the session's foreground process group, or with
// shell to its shell.
func (m *Manager) Signal(owner, id, signal string, shell bool) (bool, Info, error) {
	s, err := m.get(owner, id)
	if err != nil {
		return false, Info{}, err
	}
	ok, err := m.signal(s, signal, shell)
	if err != nil {
		return false, Info{}, err
	}
	return ok, m.info(s), nil
}
