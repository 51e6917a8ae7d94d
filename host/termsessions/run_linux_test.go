//go:build linux

package termsessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
)

// runCmd runs cmd in session id as the persistent tool types it, with
// markers assembled by the shell.
func runCmd(t *testing.T, f *fixture, owner, id, nonce, cmd string, wait time.Duration) Sent {
	t.Helper()
	line := "printf '%s_%s__\\n' RUN-START " + nonce + "; " + cmd + "; printf '\\n%s_%s:%s\\n' RUN-END " + nonce + " $?"
	ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
	defer cancel()
	out, err := f.m.Settle(ctx, owner, id, SendRequest{Text: line, Submit: true, Wait: wait,
		Capture: &Capture{From: "RUN-START_" + nonce + "__", Until: "RUN-END_" + nonce + ":"}})
	if err != nil {
		t.Fatalf("run %q: %v", cmd, err)
	}
	return out
}

// One shell, a run after each way a run can end: the marker, a read of
// the terminal, a timeout; state carries over; meanwhile the session
// answers SEND_ACTIVE; then exit.
func TestRunSession(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "a", OpenRequest{})
	out := runCmd(t, f, "a", in.ID, "n1", "cd /; X=kept; echo hi; false", 10*time.Second)
	c := out.Captured
	if out.Wait != terminals.WaitMarker || !c.Started || !c.Ended || c.Rest != "1" || string(c.Data) != "hi\r\n\r\n" || out.HasScreen {
		t.Fatalf("a run: wait %s %q, %+v (data %q)", out.Wait, out.Detail, c, c.Data)
	}
	if !strings.Contains(string(runCmd(t, f, "a", in.ID, "n2", "echo $X; pwd", 10*time.Second).Captured.Data), "kept\r\n/\r\n") {
		t.Fatal("state did not carry over")
	}

	// A read of the terminal ends a run without its marker: the partial
	// output, then whatever the reader printed.
	out = runCmd(t, f, "a", in.ID, "n3", "echo before; read -p 'name? ' v", 10*time.Second)
	if out.Wait != terminals.WaitStdinRead || out.Captured.Ended || !strings.Contains(string(out.Captured.Data), "before\r\nname? ") {
		t.Fatalf("a run that reads: wait %s %q, %+v", out.Wait, out.Detail, out.Captured)
	}
	// The reader takes the next line; the run's end follows.
	f.send(t, "a", in.ID, "x")
	f.readToPrompt(t, "a", in.ID, "RUN-END_n3:0")

	// While a run waits, other sends and reads are refused. The command
	// ends when the test lets it, not after a time the test must beat.
	gate := filepath.Join(t.TempDir(), "gate")
	done := make(chan Sent, 1)
	go func() {
		done <- runCmd(t, f, "a", in.ID, "n4", "until [ -e "+gate+" ]; do sleep 0.05; done; echo late", 30*time.Second)
	}()
	for deadline := time.Now().Add(receiveWithin); ; time.Sleep(5 * time.Millisecond) {
		if _, err := f.m.Read(context.Background(), "a", in.ID, 0); errors.Is(err, terminals.ErrSendActive) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not hold the session within %s", receiveWithin)
		}
	}
	if _, err := f.m.Send(context.Background(), "a", in.ID, "echo x", true, ""); !errors.Is(err, terminals.ErrSendActive) || !strings.Contains(err.Error(), "a command runs") {
		t.Fatalf("a send during a run: %v", err)
	}
	if _, err := f.m.Read(context.Background(), "a", in.ID, 0); !errors.Is(err, terminals.ErrSendActive) {
		t.Fatalf("a read during a run: %v", err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := receive(t, done, "the run"); out.Wait != terminals.WaitMarker || string(out.Captured.Data) != "late\r\n\r\n" {
		t.Fatalf("the run: %s %+v", out.Wait, out.Captured)
	}
	// A quiet command is not idle: the run waits it out, to its timeout.
	out = runCmd(t, f, "a", in.ID, "n5", "echo started; sleep 30", 2500*time.Millisecond)
	if out.Wait != terminals.WaitTimeout || out.Captured.Ended || string(out.Captured.Data) != "started\r\n" {
		t.Fatalf("a run that times out: %s %q %+v", out.Wait, out.Detail, out.Captured)
	}
	if _, _, err := f.m.Signal("a", in.ID, "SIGINT", false); err != nil {
		t.Fatal(err)
	}
	f.readToPrompt(t, "a", in.ID, "")
	out = runCmd(t, f, "a", in.ID, "n6", "echo bye; exit 3", 10*time.Second)
	if out.Wait != terminals.WaitSessionExit || !out.Exited || out.ExitCode != 3 || string(out.Captured.Data) != "bye\r\nexit\r\n" { // bash says exit
		t.Fatalf("a run that exits: %s %q %+v", out.Wait, out.Detail, out.Captured)
	}
}

// slowScreen takes each piece of output slowly, as an emulator under load
// does: the terminal's reader holds what it read meanwhile.
type slowScreen struct{}

func (slowScreen) Write(p []byte) (int, error) {
	time.Sleep(200 * time.Millisecond)
	return len(p), nil
}
func (slowScreen) Resize(int, int) {}
func (slowScreen) Close() error    { return nil }

// A run ends at its marker however slowly the screen takes the output:
// the shell back at its prompt, with the output's end held by the
// terminal's reader, is not a command that reads its input.
func TestRunWaitsForHeldOutput(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Attach = func(_ string, term *procs.Terminal) Screen {
			term.Observe(slowScreen{})
			return slowScreen{}
		}
	})
	in := f.open(t, "a", OpenRequest{})
	f.readToPrompt(t, "a", in.ID, "")
	for i := range 3 {
		out := runCmd(t, f, "a", in.ID, fmt.Sprint("n", i), "seq 1 3000", 60*time.Second)
		if out.Wait != terminals.WaitMarker || !strings.HasSuffix(string(out.Captured.Data), "\r\n3000\r\n\r\n") {
			d := out.Captured.Data
			t.Fatalf("run %d: wait %s %q, ended %v, output ends %q", i, out.Wait, out.Detail, out.Captured.Ended, d[max(len(d)-40, 0):])
		}
	}
	// A command that stops settles with all it printed before.
	in = f.open(t, "a", OpenRequest{})
	f.readToPrompt(t, "a", in.ID, "")
	out := runCmd(t, f, "a", in.ID, "s", "set +m; seq 1 3000; sh -c 'kill -STOP $$'", 60*time.Second)
	if d := out.Captured.Data; out.Wait != terminals.WaitInferredIdle || !strings.HasSuffix(string(d), "\r\n3000\r\n") {
		t.Fatalf("a command that stops: wait %s %q, output ends %q", out.Wait, out.Detail, d[max(len(d)-40, 0):])
	}
}
