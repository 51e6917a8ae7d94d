//go:build linux

package termsessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/internal/testneeds"
)

func (f *fixture) settle(t *testing.T, id string, req SendRequest) Sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	start := time.Now()
	out, err := f.m.Settle(ctx, "agent", id, req)
	if err != nil {
		t.Fatalf("send %+v to %s: %v", req, id, err)
	}
	t.Logf("%q settled as %s in %s", req.Text, out.Wait, time.Since(start).Round(time.Millisecond))
	return out
}

// A send settles on evidence: the shell back at its prompt reads the
// terminal (stdin_read), a sleeping command outlasts the wait (timeout)
// or, with a short idle bound, is quiet without reading (inferred_idle),
// and exit ends the session (session_exit). The screen comes with it.
func TestSettle(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.IdleAfter = 700 * time.Millisecond })
	in := f.open(t, "agent", OpenRequest{Cols: 80, Rows: 10})

	out := f.settle(t, in.ID, SendRequest{Text: "echo he''llo", Submit: true, Wait: 5 * time.Second})
	if out.Wait != terminals.WaitStdinRead || !strings.Contains(out.Detail, "bash") {
		t.Fatalf("echo: %q %q", out.Wait, out.Detail)
	}
	if !out.HasScreen || !strings.Contains(out.Screen.Viewport, "\nhello\n") {
		t.Fatalf("echo's screen: %+v", out.Screen)
	}

	out = f.settle(t, in.ID, SendRequest{Text: "sleep 3", Submit: true, Wait: 300 * time.Millisecond})
	if out.Wait != terminals.WaitTimeout {
		t.Fatalf("sleep with a short wait: %q %q", out.Wait, out.Detail)
	}
	out = f.settle(t, in.ID, SendRequest{Wait: 5 * time.Second})
	if out.Wait != terminals.WaitInferredIdle || !strings.Contains(out.Detail, "sleep") {
		t.Fatalf("sleep, quiet: %q %q", out.Wait, out.Detail)
	}
	out = f.settle(t, in.ID, SendRequest{Signal: "SIGINT", Text: "read -p 'name? ' x", Submit: true, Wait: 5 * time.Second})
	if out.Wait != terminals.WaitStdinRead || !strings.Contains(out.Screen.Viewport, "name? ") {
		t.Fatalf("read -p: %q %q %q", out.Wait, out.Detail, out.Screen.Viewport)
	}

	// Output past the screen is handed out once, within the budget, with
	// what was left out counted.
	f.settle(t, in.ID, SendRequest{Text: "ada", Submit: true, Wait: 5 * time.Second})
	out = f.settle(t, in.ID, SendRequest{Text: "seq 1 100", Submit: true, Wait: 5 * time.Second, Budget: 200})
	u := out.Screen.Unread
	if u.Lines+u.OmittedLines < 90 || u.OmittedLines == 0 || !strings.HasSuffix(u.Text, "\n") {
		t.Fatalf("seq's scrollback: %+v", u)
	}
	out = f.settle(t, in.ID, SendRequest{Text: "exit 3", Submit: true, Wait: 5 * time.Second})
	if out.Wait != terminals.WaitSessionExit || out.Detail != "the shell exited with code 3" || !out.Exited {
		t.Fatalf("exit: %q %q %+v", out.Wait, out.Detail, out.Info)
	}
}

// A stopped foreground settles at once (nothing moves until it is
// continued), as inferred_idle saying so, well before the idle bound; a
// run ends the same way.
func TestSettleStopped(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.IdleAfter = time.Minute })
	in := f.open(t, "agent", OpenRequest{})
	// Without job control the shell does not take the terminal back from
	// a child that stops.
	out := f.settle(t, in.ID, SendRequest{Text: "set +m; sh -c 'kill -STOP $$'", Submit: true, Wait: 10 * time.Second})
	if out.Wait != terminals.WaitInferredIdle || !strings.Contains(out.Detail, "stopped") {
		t.Fatalf("a stopped foreground: %q %q", out.Wait, out.Detail)
	}
	in = f.open(t, "agent", OpenRequest{})
	run := runCmd(t, f, "agent", in.ID, "s1", "set +m; echo going; sh -c 'kill -STOP $$'", 10*time.Second)
	if run.Wait != terminals.WaitInferredIdle || !strings.Contains(run.Detail, "stopped") || string(run.Captured.Data) != "going\r\n" {
		t.Fatalf("a run whose command stops: %q %q %+v", run.Wait, run.Detail, run.Captured)
	}
}

// A foreground that computes before it reads (here a python busy on a
// CPU for 3 s, then at its prompt: an interpreter whose start is slow on a
// loaded machine) is not idle however long it is quiet: the wait goes on
// to the send's bound (timeout, the process named running) or to its
// read, never inferred_idle at the idle bound.
func TestSettleWaitsForABusyForeground(t *testing.T) {
	testneeds.Command(t, "python3")
	f := newFixture(t, func(c *Config) { c.IdleAfter = 700 * time.Millisecond })
	in := f.open(t, "agent", OpenRequest{Cols: 80, Rows: 10})
	f.readToPrompt(t, "agent", in.ID, "")
	slowREPL := `python3 -c $'import time\nt = time.time()\nwhile time.time() - t < 3: pass\ninput("py> ")'`
	out := f.settle(t, in.ID, SendRequest{Text: slowREPL, Submit: true, Wait: 2 * time.Second})
	if out.Wait != terminals.WaitTimeout || !strings.Contains(out.Detail, "python3: running (state R)") {
		t.Fatalf("a busy foreground, short wait: %q %q", out.Wait, out.Detail)
	}
	out = f.settle(t, in.ID, SendRequest{Wait: 20 * time.Second})
	if out.Wait != terminals.WaitStdinRead || !strings.Contains(out.Detail, "python3") || !strings.Contains(out.Screen.Viewport, "py> ") {
		t.Fatalf("the busy foreground at its prompt: %q %q %q", out.Wait, out.Detail, out.Screen.Viewport)
	}
}

// A send holds the session through its wait: another send then is
// refused, so it cannot settle the first one's wait with its own output.
func TestSettleHoldsTheSession(t *testing.T) {
	// No idle bound to end the wait early: it ends when the command the
	// test lets go of is done and the shell reads again.
	f := newFixture(t, func(c *Config) { c.IdleAfter = time.Minute })
	in := f.open(t, "agent", OpenRequest{})
	typed := make(chan struct{}, 1)
	f.b.onSend = func(context.Context) error {
		select {
		case typed <- struct{}{}: // the first send; there is no other
		default:
		}
		return nil
	}
	gate := filepath.Join(t.TempDir(), "gate")
	type result struct {
		out Sent
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		out, err := f.m.Settle(ctx, "agent", in.ID, SendRequest{Text: "until [ -e " + gate + " ]; do sleep 0.05; done; echo slept", Submit: true, Wait: 30 * time.Second})
		done <- result{out, err}
	}()
	receive(t, typed, "the send reaching the backend")
	if _, err := f.m.Send(context.Background(), "agent", in.ID, "echo meddling", true, ""); !errors.Is(err, terminals.ErrSendActive) {
		t.Fatalf("a send during another's wait: %v", err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := receive(t, done, "the send's wait")
	if r.err != nil || r.out.Wait != terminals.WaitStdinRead || !strings.Contains(r.out.Screen.Viewport, "slept") {
		t.Fatalf("the send: %v %s %q", r.err, r.out.Wait, r.out.Screen.Viewport)
	}
}
