package termsessions

import (
	"context"
	"fmt"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions/screen"
	"github.com/dshrun/dsh/host/termsessions/settle"
)

// The bounds of a send's wait.
const (
	// DefaultIdleAfter is Config.IdleAfter's default.
	DefaultIdleAfter = 1500 * time.Millisecond
	// firstLook is how long output must be quiet before a send's wait
	// looks whether the foreground reads the terminal (a look is two
	// passes over /proc a few milliseconds apart, about 0.3 ms of CPU); a
	// program that prints is not waiting for input. Each look that finds
	// no read doubles the time to the next, up to lookEvery, so a quiet
	// command costs little however long it runs; new output starts over.
	firstLook = 20 * time.Millisecond
	lookEvery = 160 * time.Millisecond
	// pollEvery is how often a send's wait watches the output counter.
	pollEvery = 10 * time.Millisecond
)

// SendRequest is what Settle is asked: Send's text, submit and signal,
// then a wait of up to Wait (at most terminals.MaxWait; 0 for none) for
// the session to settle, and the screen within Budget characters (0
// means terminals.DefaultBudget).
type SendRequest struct {
	Text, Signal string
	Submit       bool
	Wait         time.Duration
	Budget       int
	// Capture makes the send a run: the answer is the command's output
	// between the capture's markers (and no screen), Wait may be up to
	// terminals.MaxRunWait, and quiet output does not settle it.
	Capture *Capture
}

// Sent is a settled send.
type Sent struct {
	Info
	// Wait is why the wait ended (a terminals.Wait* reason; empty without
	// a wait), Detail what it saw.
	Wait, Detail string
	// Screen is the session's screen as the wait ended; HasScreen is false
	// for a session with no Viewer.
	Screen    screen.Read
	HasScreen bool
	// Captured is what a run found.
	Captured *Captured
}

// Settle is Send, then a wait for the session to settle.
func (m *Manager) Settle(ctx context.Context, owner, id string, req SendRequest) (Sent, error) {
	if req.Capture != nil {
		return m.run(ctx, owner, id, req)
	}
	// The send holds the session through its wait too: what another send
	// typed meanwhile would settle this one's wait on its output.
	s, b, release, err := m.acquire(owner, id, false)
	if err != nil {
		return Sent{}, err
	}
	defer release()
	in, err := m.typeInto(ctx, s, b, req.Text, req.Submit, req.Signal)
	if err != nil {
		return Sent{}, err
	}
	out := Sent{Info: in}
	if req.Wait > 0 {
		out.Wait, out.Detail = m.settleSend(ctx, s, min(req.Wait, terminals.MaxWait))
		out.Info = m.info(s)
	}
	m.settleSandbox(ctx, s, true)
	out.Screen, out.HasScreen = m.look(s, req.Budget)
	return out, nil
}

// settleSend waits up to wait, after typing, until the shell exits, the
// foreground is seen blocked reading the terminal, or the output has been
// quiet for the idle bound with no such read seen and no process of the
// foreground seen running meanwhile. A read is looked for only once output
// has been quiet a moment, then at growing intervals (see lookout), never
// in a hot loop.
//
// A foreground seen running (state R: on a CPU or waiting for one) counts
// as activity, as output does: a program that computes before it prints
// or reads (an interpreter loading its modules before its first prompt,
// slow on a loaded machine) is not idle however long it is quiet, so the
// wait goes on to its read, its exit or the send's wait.
func (m *Manager) settleSend(ctx context.Context, s *Session, wait time.Duration) (reason, detail string) {
	t := s.term
	start := time.Now()
	deadline := start.Add(wait)
	last, quietSince := t.Printed(), start
	busyAt := start // the last look that found the foreground running
	var looks lookout
	lastDetail := ""
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if st, code, sig := t.State(); st != procs.Running {
			if sig != "" {
				return terminals.WaitSessionExit, "the shell was ended by " + sig
			}
			return terminals.WaitSessionExit, fmt.Sprintf("the shell exited with code %d", code)
		}
		now := time.Now()
		if n := t.Printed(); n != last {
			last, quietSince = n, now
			looks.reset()
		}
		quiet := now.Sub(quietSince)
		if looks.due(now, quietSince) {
			res, err := m.cfg.Check(t.Master(), t.Pid())
			switch {
			case err != nil:
				lastDetail = err.Error()
			case res.Reason == settle.StdinRead && drained(t) && t.Printed() == last:
				return terminals.WaitStdinRead, res.Detail
			case res.Reason == settle.Stopped && drained(t) && t.Printed() == last:
				// Nothing moves until it is continued: waiting longer shows
				// nothing new (once what it printed is in).
				return terminals.WaitInferredIdle, res.Detail
			default:
				lastDetail = res.Detail
				if res.Busy {
					busyAt = now
				}
			}
		}
		if quiet >= m.cfg.IdleAfter && now.Sub(busyAt) >= m.cfg.IdleAfter {
			d := fmt.Sprintf("no output for %s", m.cfg.IdleAfter.Round(time.Millisecond))
			if lastDetail != "" {
				d += "; " + lastDetail
			}
			return terminals.WaitInferredIdle, d
		}
		if !now.Before(deadline) {
			d := fmt.Sprintf("still running after %s", wait.Round(time.Millisecond))
			if lastDetail != "" {
				d += "; " + lastDetail
			}
			return terminals.WaitTimeout, d
		}
		select {
		case <-ctx.Done():
			return terminals.WaitTimeout, "the request ended: " + ctx.Err().Error()
		case <-t.Done():
		case <-tick.C:
		}
	}
}

// drained reports whether nothing is on its way through t (see
// Terminal.InFlight); when that cannot be told, the look decides alone.
// Printed is compared after it, not before: output read meanwhile is
// then counted there.
func drained(t *procs.Terminal) bool {
	n, err := t.InFlight()
	return err != nil || n == 0
}

// lookout schedules a wait's looks at the foreground: the first once
// output has been quiet firstLook, each next one twice as long after the
// previous, up to lookEvery; new output starts over.
type lookout struct {
	last time.Time     // the previous look; zero for none since output
	gap  time.Duration // from it to the next
}

func (l *lookout) reset() { *l = lookout{} }

// due reports whether a look is due at now, output quiet since
// quietSince, and if so counts it as made.
func (l *lookout) due(now, quietSince time.Time) bool {
	if l.last.IsZero() {
		if now.Sub(quietSince) < firstLook {
			return false
		}
		l.last, l.gap = now, firstLook
		return true
	}
	if now.Sub(l.last) < l.gap {
		return false
	}
	l.last, l.gap = now, min(2*l.gap, lookEvery)
	return true
}

// next is how long from now until the next look could be due.
func (l *lookout) next(now, quietSince time.Time) time.Duration {
	if l.last.IsZero() {
		return max(firstLook-now.Sub(quietSince), time.Millisecond)
	}
	return max(l.gap-now.Sub(l.last), time.Millisecond)
}
