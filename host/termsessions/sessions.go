package termsessions

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
)

// Session is one terminal session.
type Session struct {
	ID, Owner, Name string
	Backend         string // the name it was opened with
	Dialect         string
	Cwd             string
	Opened          time.Time

	prompt []byte // what the shell prints as its prompt (the dialect's)
	term   *procs.Terminal
	screen Screen
	open   bool // started and claimed; false while Open runs

	readMu  sync.Mutex
	tail    []byte   // the end of the output read so far
	sending bool     // a Send is in flight; Manager.mu
	running bool     // and it is a run (Settle with a capture); Manager.mu
	run     *capture // the run's capture while it goes on; Manager.mu

	watchMu sync.Mutex
	watch   string // the sandbox's watch of the shell; "" for none, or once settled for good
}

// Terminal is the session's terminal (nil while it opens): its master and
// its shell's pid are there for what inspects it in the host.
func (s *Session) Terminal() *procs.Terminal { return s.term }

// Info is a session as callers see it.
type Info struct {
	ID, Name, Backend, Dialect, Cwd string
	Cols, Rows, Pid                 int
	Opened                          time.Time
	// Exited once the shell ended, with its exit code or the signal that
	// ended it.
	Exited   bool
	ExitCode int
	Signal   string
}

// get is owner's open session id. Another owner's session is answered as
// no session at all: that tells nothing of it (its id, that it exists).
func (m *Manager) get(owner, id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.getLocked(owner, id)
}

func (m *Manager) getLocked(owner, id string) (*Session, error) {
	if m.closed {
		return nil, errDisposing
	}
	if m.released[owner] {
		return nil, errNotLive(owner)
	}
	s, ok := m.sessions[id]
	if ok && s.Owner != owner {
		m.log.Warn("a request named another owner's terminal session", "session", id, "owner", owner)
	}
	if !ok || s.Owner != owner || !s.open {
		return nil, terminals.Errorf(terminals.ErrNoSession, fmt.Sprintf("no terminal session %q (closed sessions are forgotten)", id))
	}
	return s, nil
}

// checkSize refuses a size out of range; with zeroOK, 0 means the
// default.
func checkSize(cols, rows int, zeroOK bool) error {
	ok := func(n int) bool { return n >= 1 && n <= procs.MaxTerminalSide || zeroOK && n == 0 }
	if ok(cols) && ok(rows) {
		return nil
	}
	return terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("a terminal of %d columns by %d rows: each must be 1 to %d", cols, rows, procs.MaxTerminalSide))
}

// Resize sets the session's terminal size.
func (m *Manager) Resize(owner, id string, cols, rows int) (Info, error) {
	if err := checkSize(cols, rows, false); err != nil {
		return Info{}, err
	}
	s, err := m.get(owner, id)
	if err != nil {
		return Info{}, err
	}
	if err := s.term.Resize(cols, rows); err != nil {
		return Info{}, err
	}
	if s.screen != nil {
		s.screen.Resize(cols, rows)
	}
	return m.info(s), nil
}

// CloseSession ends the session: its whole process tree is gone when it
// returns (within ctx), and the session is forgotten.
func (m *Manager) CloseSession(ctx context.Context, owner, id string) (Info, error) {
	m.mu.Lock()
	s, err := m.getLocked(owner, id)
	if err == nil {
		delete(m.sessions, id)
	}
	m.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	m.changes.Fire()
	if err := m.end(ctx, s); err != nil {
		return Info{}, err
	}
	return m.info(s), nil
}

// end closes a session's terminal and waits for its tree, then settles
// the sandbox's watch of it for good.
func (m *Manager) end(ctx context.Context, s *Session) error {
	err := s.term.Close(ctx)
	if s.screen != nil {
		_ = s.screen.Close()
	}
	m.cfg.Sub.Forget(s.term.ID())
	m.settleSandbox(ctx, s, false)
	if err != nil {
		return fmt.Errorf("close terminal session %s: %w", s.ID, err)
	}
	m.log.Debug("terminal closed", "session", s.ID, "owner", s.Owner)
	return nil
}

// List is owner's open sessions, oldest first.
func (m *Manager) List(owner string) ([]Info, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errDisposing
	}
	if m.released[owner] {
		m.mu.Unlock()
		return nil, errNotLive(owner)
	}
	var mine []*Session
	for _, s := range m.sessions {
		if s.Owner == owner && s.open {
			mine = append(mine, s)
		}
	}
	m.mu.Unlock()
	sort.Slice(mine, func(a, b int) bool {
		return mine[a].Opened.Before(mine[b].Opened) || mine[a].Opened.Equal(mine[b].Opened) && mine[a].ID < mine[b].ID
	})
	out := make([]Info, 0, len(mine))
	for _, s := range mine {
		out = append(out, m.info(s))
	}
	return out, nil
}

// ReleaseOwner ends every session of owner (its session with the agent
// ended) and waits, within ctx, until their trees are gone. The owner is
// not live from then on: nothing more is opened for it.
func (m *Manager) ReleaseOwner(ctx context.Context, owner string) error {
	m.mu.Lock()
	m.released[owner] = true
	var gone []*Session
	for id, s := range m.sessions {
		if s.Owner == owner {
			delete(m.sessions, id)
			if s.open {
				gone = append(gone, s)
			}
		}
	}
	m.mu.Unlock()
	return m.endAll(ctx, gone)
}

// Close ends every session and waits, within ctx, until their trees are
// gone; every request is refused from then on.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	var gone []*Session
	for id, s := range m.sessions {
		delete(m.sessions, id)
		if s.open {
			gone = append(gone, s)
		}
	}
	clear(m.backends)
	m.mu.Unlock()
	return m.endAll(ctx, gone)
}

func (m *Manager) endAll(ctx context.Context, ss []*Session) error {
	if len(ss) > 0 {
		m.changes.Fire()
	}
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { errs[i] = m.end(ctx, s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// info is s as callers see it.
func (m *Manager) info(s *Session) Info {
	in := Info{ID: s.ID, Name: s.Name, Backend: s.Backend, Dialect: s.Dialect, Cwd: s.Cwd, Opened: s.Opened}
	if s.term != nil {
		in.Cols, in.Rows = s.term.Size()
		in.Pid = s.term.Pid()
		st, code, sig := s.term.State()
		if st != procs.Running {
			in.Exited, in.ExitCode, in.Signal = true, code, sig
		}
	}
	return in
}
