package terminals

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/terminals"
)

// A capture finds its markers wherever the reads split them, and keeps
// the head and tail of what lies between.
func TestCaptureSplits(t *testing.T) {
	stream := "echo-of-the-typed-line\r\nSTART-1\r\nline one\r\nline two\r\nEND-1:7\r\n$ "
	for split := 1; split < len(stream); split++ {
		c := newCapture(Capture{From: "START-1", Until: "END-1:", MaxBytes: 1 << 10})
		c.feed([]byte(stream[:split]))
		c.feed([]byte(stream[split:]))
		r := c.result()
		if !r.Started || !r.Ended || string(r.Data) != "line one\r\nline two\r\n" || r.Rest != "7" || r.Omitted != 0 {
			t.Fatalf("split at %d: %+v (data %q)", split, r, r.Data)
		}
	}
	// The until's line has not ended: not yet.
	c := newCapture(Capture{From: "S", Until: "E:", MaxBytes: 100})
	c.feed([]byte("S\nout\nE:12"))
	if c.ended {
		t.Fatal("ended before the marker's line did")
	}
	c.feed([]byte("3\r\n"))
	if r := c.result(); !r.Ended || r.Rest != "123" || string(r.Data) != "out\n" {
		t.Fatalf("%+v", r)
	}
}

// Output over the bound keeps its first and last halves, with the rest
// counted, and still finds the end marker.
func TestCaptureBound(t *testing.T) {
	c := newCapture(Capture{From: "S", Until: "END:", MaxBytes: 1000})
	c.feed([]byte("S\n"))
	var all bytes.Buffer
	for i := range 20000 {
		line := []byte(strings.Repeat(string(rune('a'+i%26)), 99) + "\n")
		all.Write(line)
		c.feed(line)
	}
	c.feed([]byte("EN"))
	c.feed([]byte("D:0\n"))
	r := c.result()
	want := all.Bytes()
	if !r.Ended || r.Rest != "0" || len(r.Data) != 1000 || r.Omitted != int64(len(want)-1000) {
		t.Fatalf("ended %v rest %q: %d bytes kept, %d omitted", r.Ended, r.Rest, len(r.Data), r.Omitted)
	}
	if !bytes.Equal(r.Data[:500], want[:500]) || !bytes.Equal(r.Data[500:], want[len(want)-500:]) {
		t.Fatalf("kept %q ... %q", r.Data[:40], r.Data[len(r.Data)-40:])
	}
	// A from that never comes: the end of what was printed, counted.
	c = newCapture(Capture{From: "S", Until: "E", MaxBytes: 10})
	c.feed(bytes.Repeat([]byte("x"), 300<<10))
	c.feed([]byte(">>> "))
	if r := c.result(); r.Started || string(r.Data) != "xxxxxx>>> " || r.Omitted != 300<<10-6 {
		t.Fatalf("not started: %+v", r)
	}
}

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

	// While a run waits, other sends and reads are refused.
	done := make(chan Sent, 1)
	go func() { done <- runCmd(t, f, "a", in.ID, "n4", "sleep 0.6; echo late", 10*time.Second) }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := f.m.Read(context.Background(), "a", in.ID, 0); errors.Is(err, terminals.ErrSendActive) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := f.m.Send(context.Background(), "a", in.ID, "echo x", true, ""); !errors.Is(err, terminals.ErrSendActive) || !strings.Contains(err.Error(), "a command runs") {
		t.Fatalf("a send during a run: %v", err)
	}
	if _, err := f.m.Read(context.Background(), "a", in.ID, 0); !errors.Is(err, terminals.ErrSendActive) {
		t.Fatalf("a read during a run: %v", err)
	}
	if out := <-done; out.Wait != terminals.WaitMarker || string(out.Captured.Data) != "late\r\n\r\n" {
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
