package termsessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/randid"
	"github.com/dshrun/dsh/plugins/termbackend"
	"github.com/dshrun/dsh/sdk"
)

// OpenRequest is what Open is asked.
type OpenRequest struct {
	Backend, Name, Cwd string
	Cols, Rows         int
}

// sessionName bounds the name a session is opened with.
var sessionName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// cleanupTimeout bounds the close of what a failed open left.
const cleanupTimeout = 10 * time.Second

// Open starts a session for owner through a backend and holds its
// terminal.
func (m *Manager) Open(ctx context.Context, owner string, req OpenRequest) (Info, error) {
	if err := checkSize(req.Cols, req.Rows, true); err != nil {
		return Info{}, err
	}
	if req.Name != "" && !sessionName.MatchString(req.Name) {
		return Info{}, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("session name %q: use 1 to 64 letters, digits, '.', '_' or '-'", req.Name))
	}
	if req.Cwd != "" {
		if !filepath.IsAbs(req.Cwd) {
			return Info{}, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("working directory %q is not an absolute path", req.Cwd))
		}
		if fi, err := os.Stat(req.Cwd); err != nil || !fi.IsDir() {
			return Info{}, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("working directory %s does not exist or is not a directory", req.Cwd))
		}
	}
	s, b, err := m.reserve(owner, req)
	if err != nil {
		return Info{}, err
	}
	t, st, err := m.start(ctx, s, b, req)
	// The screen is there before anything can reach the session.
	var screen Screen
	if err == nil && m.cfg.Attach != nil {
		screen = m.cfg.Attach(s.ID, t)
	}
	m.mu.Lock()
	if err == nil {
		switch {
		case m.closed:
			err = errDisposing
		case m.released[owner] || m.sessions[s.ID] != s:
			err = errNotLive(owner)
		default:
			s.term, s.screen, s.open, s.watch = t, screen, true, st.GetSettle()
			s.Dialect, s.prompt, s.Cwd = st.GetDialect().GetName(), st.GetDialect().GetPrompt(), st.Cwd
			if s.Cwd == "" {
				s.Cwd = req.Cwd
			}
		}
	}
	if err != nil {
		if m.sessions[s.ID] == s {
			delete(m.sessions, s.ID)
		}
		m.mu.Unlock()
		if screen != nil {
			_ = screen.Close()
		}
		if t != nil {
			// Started for an owner that went meanwhile, or a closing host.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_ = t.Close(cctx)
			cancel()
			m.cfg.Sub.Forget(t.ID())
			m.settleWatch(ctx, s, st.GetSettle(), false)
		}
		return Info{}, err
	}
	m.mu.Unlock()
	m.changes.Fire()
	t.AfterDone(m.changes.Fire) // its program ended: no longer alive
	m.log.Debug("terminal opened", "session", s.ID, "owner", owner, "backend", b.name, "plugin", b.plugin, "pid", t.Pid())
	return m.info(s), nil
}

// reserve checks what Open may do for owner and holds a place for the
// session among owner's, so that concurrent opens keep to the cap and to
// unique names.
func (m *Manager) reserve(owner string, req OpenRequest) (*Session, *backend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, errDisposing
	}
	if m.released[owner] {
		return nil, nil, errNotLive(owner)
	}
	b, err := m.pickLocked(req.Backend)
	if err != nil {
		return nil, nil, err
	}
	held := 0
	for _, s := range m.sessions {
		if s.Owner != owner {
			continue
		}
		held++
		if req.Name != "" && s.Name == req.Name {
			return nil, nil, terminals.Errorf(terminals.ErrDuplicateName, fmt.Sprintf("a terminal session named %q is open already (%s): close it or choose another name", req.Name, s.ID))
		}
	}
	if held >= m.cfg.MaxPerOwner {
		return nil, nil, terminals.Errorf(terminals.ErrTooMany, fmt.Sprintf("%d terminal sessions are open, the most one owner may hold: close one first", held))
	}
	m.next++
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := "t" + strconv.Itoa(m.next) + "-" + hex.EncodeToString(rnd[:])
	if m.cfg.Handles != nil && m.cfg.Handles(owner) {
		id = "t-" + randid.New()
	}
	s := &Session{
		ID:      id,
		Owner:   owner,
		Name:    req.Name,
		Backend: b.name,
		Opened:  m.cfg.Now(),
	}
	m.sessions[s.ID] = s
	return s, b, nil
}

// start asks the backend to start the session and claims the terminal it
// spawned. Whatever a failed start left (a terminal spawned under its
// call that nobody claimed) is closed.
func (m *Manager) start(ctx context.Context, s *Session, b *backend, req OpenRequest) (*procs.Terminal, *termbackend.Started, error) {
	t, st, err := m.start1(ctx, s, b, req)
	if err != nil && errors.Is(err, sdk.ErrProviderGone) && ctx.Err() == nil {
		// The backend's process was gone (a crash its supervisor had not
		// seen yet; what it left is closed): its successor starts it.
		m.mu.Lock()
		b = m.backends[s.Backend]
		m.mu.Unlock()
		if b != nil {
			t, st, err = m.start1(ctx, s, b, req)
		}
	}
	return t, st, err
}

func (m *Manager) start1(ctx context.Context, s *Session, b *backend, req OpenRequest) (*procs.Terminal, *termbackend.Started, error) {
	conn, call, end := b.slot.Reach(s.Owner)
	defer end()
	var st *termbackend.Started
	fail := func(err error) (*procs.Terminal, *termbackend.Started, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cerr := m.cfg.Sub.CloseUnclaimed(cctx, s.Owner, call); cerr != nil {
			m.log.Warn("what a failed terminal open left is still running", "session", s.ID, "backend", b.name, "error", cerr)
		}
		m.settleWatch(ctx, s, st.GetSettle(), false)
		return nil, nil, err
	}
	st, err := termbackend.NewClient(conn).Start(ctx, &termbackend.StartRequest{Session: s.ID, Cwd: req.Cwd, Cols: uint32(req.Cols), Rows: uint32(req.Rows)})
	if err != nil {
		return fail(fmt.Errorf("open a terminal with backend %q (plugin %s): %w", b.name, b.label, err))
	}
	t, err := m.cfg.Sub.Terminal(s.Owner, st.ProcessId)
	if err != nil {
		return fail(fmt.Errorf("open a terminal with backend %q (plugin %s): the backend answered with process %q, which is no terminal of the session's owner: %v", b.name, b.label, st.ProcessId, err))
	}
	if !t.Claim() {
		// Another session holds it: not this one's to close.
		m.settleWatch(ctx, s, st.GetSettle(), false)
		return nil, nil, fmt.Errorf("open a terminal with backend %q (plugin %s): the backend answered with terminal %s, which another session holds", b.name, b.label, st.ProcessId)
	}
	return t, st, nil
}
