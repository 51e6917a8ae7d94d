package termsessions

import (
	"context"
	"strings"
	"time"
)

// settleTimeout bounds one settle of a session's sandbox watch.
const settleTimeout = 30 * time.Second

// settleSandbox undoes what s's confined shell created that no runner can
// stop (a new .git, an .envrc that did not exist): after each send, so it
// is gone before the next command (the watch goes on), and for good once
// the session's tree is gone.
func (m *Manager) settleSandbox(ctx context.Context, s *Session, keep bool) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.watch = m.settleWatch(ctx, s, s.watch, keep)
}

// settleWatch settles token for s and logs what was undone (a send's
// answer has no place for it); with keep it is the watch going on.
func (m *Manager) settleWatch(ctx context.Context, s *Session, token string, keep bool) string {
	if token == "" || m.cfg.SandboxSettle == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	next, undone, err := m.cfg.SandboxSettle(ctx, token, keep)
	if err != nil {
		m.log.Warn("what a sandboxed terminal session created could not be checked by the sandbox", "session", s.ID, "owner", s.Owner, "error", err)
		return ""
	}
	if len(undone) > 0 {
		var what []string
		for _, u := range undone {
			what = append(what, u.GetPath()+" ("+u.GetWhy()+")")
		}
		m.log.Warn("the sandbox undid what a terminal session's commands created that they may not", "session", s.ID, "owner", s.Owner, "undone", strings.Join(what, "; "))
	}
	if !keep {
		return ""
	}
	return next
}
