package termsessions

import (
	"context"
	"time"

	"github.com/dshrun/dsh/host/termsessions/screen"
)

// Output is one consuming read of a session.
type Output struct {
	Info
	Data    []byte
	Dropped int64
	// AtPrompt: the output so far ends at the shell's prompt.
	AtPrompt bool
	// Screen is the look at the screen after the read (HasScreen false
	// for a session with no Viewer).
	Screen    screen.Read
	HasScreen bool
}

// tailBytes is how much of a session's output end is kept to
// recognise its prompt.
const tailBytes = 4 << 10

// Read consumes the session's new output, waiting up to wait for some.
func (m *Manager) Read(ctx context.Context, owner, id string, wait time.Duration) (Output, error) {
	return m.ReadScreen(ctx, owner, id, wait, 0)
}

// ReadScreen is Read, then a look at the session's screen within budget
// characters (0 means terminals.DefaultBudget): the viewport and the
// unread scrollback, with what was left out counted.
func (m *Manager) ReadScreen(ctx context.Context, owner, id string, wait time.Duration, budget int) (Output, error) {
	m.mu.Lock()
	s, err := m.getLocked(owner, id)
	if err == nil && s.running {
		err = errSendActive(s)
	}
	m.mu.Unlock()
	if err != nil {
		return Output{}, err
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	r := s.term.Read(ctx, wait)
	s.tail = append(s.tail, r.Data...)
	if over := len(s.tail) - tailBytes; over > 0 {
		s.tail = append([]byte(nil), s.tail[over:]...)
	}
	out := Output{Info: m.info(s), Data: r.Data, Dropped: r.Dropped}
	out.AtPrompt = !out.Exited && AtPrompt(s.tail, s.prompt)
	out.Screen, out.HasScreen = m.look(s, budget)
	return out, nil
}
