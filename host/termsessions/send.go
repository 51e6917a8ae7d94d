package termsessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions/settle"
	"github.com/dshrun/dsh/plugins/termbackend"
	"github.com/dshrun/dsh/sdk"
)

// settleQuiet and settleMax bound the wait between a signal and the
// text sent with it.
const (
	settleQuiet = 100 * time.Millisecond
	settleMax   = 5 * time.Second
)

// Send signals the foreground first (when asked), then types text through
// the session's backend, submitting it when asked. One send at a time.
func (m *Manager) Send(ctx context.Context, owner, id, text string, submit bool, signal string) (Info, error) {
	in, _, err := m.send(ctx, owner, id, text, submit, signal)
	return in, err
}

func (m *Manager) send(ctx context.Context, owner, id, text string, submit bool, signal string) (Info, *Session, error) {
	s, b, release, err := m.acquire(owner, id, false)
	if err != nil {
		return Info{}, nil, err
	}
	defer release()
	in, err := m.typeInto(ctx, s, b, text, submit, signal)
	return in, s, err
}

// acquire holds owner's session id for one send (with run, a run: reads
// are refused too) and returns its backend as registered now.
func (m *Manager) acquire(owner, id string, run bool) (*Session, *backend, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.getLocked(owner, id)
	if err != nil {
		return nil, nil, nil, err
	}
	if s.sending {
		return nil, nil, nil, errSendActive(s)
	}
	s.sending, s.running = true, run
	release := func() {
		m.mu.Lock()
		s.sending, s.running = false, false
		m.mu.Unlock()
	}
	return s, m.backends[s.Backend], release, nil
}

func errSendActive(s *Session) error {
	if s.running {
		return terminals.Errorf(terminals.ErrSendActive, fmt.Sprintf("a command runs in terminal session %s (the persistent shell of a tool): wait for it to end", s.ID))
	}
	return terminals.Errorf(terminals.ErrSendActive, fmt.Sprintf("a send to terminal session %s is in flight: wait for it (or signal the session)", s.ID))
}

// typeInto signals the foreground first (when asked), then types text
// into the held session s through backend b.
func (m *Manager) typeInto(ctx context.Context, s *Session, b *backend, text string, submit bool, signal string) (Info, error) {
	if signal != "" {
		if _, err := m.signal(s, signal, false); err != nil {
			return Info{}, err
		}
		if text != "" || submit {
			m.settleShell(ctx, s.term)
		}
	}
	if text == "" && !submit {
		return m.info(s), nil
	}
	if st, _, _ := s.term.State(); st != procs.Running {
		return m.info(s), nil // nothing to type into
	}
	if b == nil {
		return Info{}, terminals.Errorf(terminals.ErrNoBackend, fmt.Sprintf("terminal backend %q, which session %s was opened with, is not registered now: close the session", s.Backend, s.ID))
	}
	call, err := m.type1(ctx, s, b, text, submit)
	if err != nil && errors.Is(err, sdk.ErrProviderGone) && !s.term.WroteFor(call) && ctx.Err() == nil {
		// The backend's process was gone before it typed anything (a
		// crash its supervisor had not seen yet): its successor types.
		m.mu.Lock()
		b = m.backends[s.Backend]
		m.mu.Unlock()
		if b != nil {
			_, err = m.type1(ctx, s, b, text, submit)
		}
	}
	if err != nil {
		return Info{}, err
	}
	return m.info(s), nil
}

// type1 asks backend b once to type text into the session, and returns
// the call it acted under.
func (m *Manager) type1(ctx context.Context, s *Session, b *backend, text string, submit bool) (string, error) {
	conn, call, end := b.slot.Reach(s.Owner)
	defer end()
	if _, err := termbackend.NewClient(conn).Send(ctx, &termbackend.SendRequest{ProcessId: s.term.ID(), Text: text, Submit: submit}); err != nil {
		return call, fmt.Errorf("send to terminal session %s through backend %q (plugin %s): %w", s.ID, b.name, b.label, err)
	}
	return call, nil
}

// settleShell waits, after a signal and before typing, until the
// terminal's foreground is seen blocked reading it again (a shell back at
// its prompt, a REPL that caught the signal), nothing is on its way
// through the terminal, and it has printed nothing for a moment: input
// typed while a job dies, or while the line editor recovers from the
// signal, is lost. Where the foreground's reads cannot be seen, the shell
// having the terminal again (the foreground group is its own) stands in.
// It gives up after a bound (a foreground that ignores the signal and
// goes on computing gets the text then), or when ctx ends or the shell
// exits.
func (m *Manager) settleShell(ctx context.Context, t *procs.Terminal) {
	deadline := time.Now().Add(settleMax)
	last, quietSince := t.Printed(), time.Now()
	gap := 10 * time.Millisecond
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if st, _, _ := t.State(); st != procs.Running {
			return
		}
		if n := t.Printed(); n != last {
			last, quietSince = n, time.Now()
		}
		if time.Since(quietSince) >= settleQuiet && m.backAtRead(t) && t.Printed() == last {
			return
		}
		select {
		case <-ctx.Done():
		case <-t.Done():
		case <-time.After(gap):
		}
		gap = min(2*gap, 80*time.Millisecond) // a look reads /proc: not in a hot loop
	}
}

// backAtRead reports whether t's foreground reads the terminal with
// nothing left for it to read (see settleShell).
func (m *Manager) backAtRead(t *procs.Terminal) bool {
	res, err := m.cfg.Check(t.Master(), t.Pid())
	if err != nil {
		fg, err := t.Foreground()
		return err == nil && fg == t.Pid()
	}
	return res.Reason == settle.StdinRead && drained(t)
}
