package termsessions

import (
	"context"
	"errors"
	"sort"
	"sync"
)

// What the person who runs the host sees of the terminals: every owner's
// sessions, and a session's screen then its live output, consuming
// nothing the session's agent reads.

// Listed is a session as All lists it.
type Listed struct {
	Info
	Owner string
	// Command is what the terminal runs: its backend (the shell), and the
	// session's name if it has one ("bash (main)").
	Command string
}

// All lists every owner's open sessions, oldest first.
func (m *Manager) All() []Listed {
	m.mu.Lock()
	var open []*Session
	for _, s := range m.sessions {
		if s.open {
			open = append(open, s)
		}
	}
	m.mu.Unlock()
	out := make([]Listed, 0, len(open))
	for _, s := range open {
		out = append(out, Listed{Info: m.info(s), Owner: s.Owner, Command: command(s)})
	}
	sort.Slice(out, func(a, b int) bool {
		return out[a].Opened.Before(out[b].Opened) || out[a].Opened.Equal(out[b].Opened) && out[a].ID < out[b].ID
	})
	return out
}

// command names what session s runs as a person knows it: its backend
// (the shell), and the name the agent gave it. The argv is a backend's
// wrapper (a bash that becomes the interactive one, a sandbox's runner),
// which says less.
func command(s *Session) string {
	if s.Name != "" {
		return s.Backend + " (" + s.Name + ")"
	}
	return s.Backend
}

// Changes signals (coalesced, once at once) whenever a session opens,
// its program ends, or it is closed; stop ends it.
func (m *Manager) Changes() (<-chan struct{}, func()) { return m.changes.Subscribe() }

// repainter is a Screen that can paint itself for a terminal (a
// *screen.Screen).
type repainter interface{ Repaint() []byte }

// maxWatchBacklog bounds the output a watcher has not taken yet; past it
// the watcher is painted the screen afresh instead.
const maxWatchBacklog = 4 << 20

// Watch hands out, through out, a repaint of owner's session id as its
// screen stands (for a session with a screen), then every byte its
// terminal prints, raw, consuming nothing: the agent's reads still get
// all of it. It returns nil once the terminal's program has ended and all
// it printed was handed out, or ctx's error. A watcher that falls behind
// by more than maxWatchBacklog is painted the screen afresh.
func (m *Manager) Watch(ctx context.Context, owner, id string, out func([]byte)) error {
	s, err := m.get(owner, id)
	if err != nil {
		return err
	}
	q := &watchQueue{more: make(chan struct{}, 1)}
	for {
		var paint []byte
		stop := s.term.Watch(func() {
			if r, ok := s.screen.(repainter); ok {
				paint = r.Repaint()
			}
		}, q)
		if len(paint) > 0 {
			out(paint)
		}
		err := q.drain(ctx, s.term.Done(), out)
		stop()
		if err != errBehind {
			return err
		}
		q.reset()
	}
}

// errBehind is a watcher that fell behind.
var errBehind = errors.New("the watcher fell behind")

// watchQueue holds what the terminal printed for a watcher until it takes
// it: the terminal never waits on a watcher.
type watchQueue struct {
	more   chan struct{}
	mu     sync.Mutex
	buf    []byte
	behind bool
}

func (q *watchQueue) Write(p []byte) (int, error) {
	q.mu.Lock()
	if len(q.buf)+len(p) > maxWatchBacklog {
		q.behind, q.buf = true, nil
	} else if !q.behind {
		q.buf = append(q.buf, p...)
	}
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (q *watchQueue) take() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b, behind := q.buf, q.behind
	q.buf = nil
	return b, behind
}

func (q *watchQueue) reset() {
	q.mu.Lock()
	q.buf, q.behind = nil, false
	q.mu.Unlock()
}

// drain hands out what comes until done (then what is left) or ctx ends;
// errBehind when the watcher fell behind.
func (q *watchQueue) drain(ctx context.Context, done <-chan struct{}, out func([]byte)) error {
	for {
		select {
		case <-q.more:
		case <-done:
			// Everything the terminal printed was added before done.
			b, behind := q.take()
			if !behind && len(b) > 0 {
				out(b)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		b, behind := q.take()
		if behind {
			return errBehind
		}
		if len(b) > 0 {
			out(b)
		}
	}
}

// Write types data into owner's session id as its agent's sends do,
// through its backend, without submitting it (data carries its own
// Enter, a carriage return, when the person typed one).
func (m *Manager) Write(ctx context.Context, owner, id string, data []byte) error {
	_, err := m.Send(ctx, owner, id, string(data), false, "")
	return err
}
