package persistentshell

import (
	"context"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/internal/golden"
)

func running() *terminals.Session {
	return &terminals.Session{Id: "t1-0123456789ab", Status: "running"}
}

func TestRender(t *testing.T) {
	text := func(r *ran, chars int) string { r.interrupt = "SIGINT"; s, _ := r.render(chars); return s }
	ended := func(data string, status int) *ran {
		return &ran{ended: true, status: status, out: &terminals.Sent{Session: running(), Wait: terminals.WaitMarker,
			Captured: &terminals.Captured{Data: []byte(data), Started: true, Ended: true, AtPrompt: true}}}
	}
	golden.Check(t, "ended-0", text(ended("\x1b[1;32mgreen\x1b[0m\r\nprogress 10%\rprogress 100%\r\n\r\n", 0), 1000))
	golden.Check(t, "ended-2", text(ended("no newline\r\n", 2), 1000))
	golden.Check(t, "ended-1-empty", text(ended("\r\n", 1), 1000)) // the marker alone
	long := strings.Repeat("a line of output\r\n", 500)
	golden.Check(t, "ended-cut", text(ended(long+"\r\n", 0), 100))
	r := ended("the end\r\n\r\n", 0)
	r.out.Captured.Omitted = 123456
	golden.Check(t, "ended-middle-cut", text(r, 100))
	golden.Check(t, "timeout", text(&ran{timeoutMs: 1000, closed: true, out: &terminals.Sent{Session: running(), Wait: terminals.WaitTimeout,
		Captured: &terminals.Captured{Data: []byte("started\r\n"), Started: true}}}, 1000))
	golden.Check(t, "stdin-read", text(&ran{notes: []string{noteInterrupted("SIGINT")}, out: &terminals.Sent{Session: running(), Wait: terminals.WaitStdinRead, WaitDetail: "pid 12 cat: read on fd 0 (/dev/pts/3)",
		Captured: &terminals.Captured{Data: []byte("before\r\nname? "), Started: true}}}, 1000))
	golden.Check(t, "stdin-read-prompt", text(&ran{untrusted: true, out: &terminals.Sent{Session: running(), Wait: terminals.WaitStdinRead,
		Captured: &terminals.Captured{Data: []byte("^C\r\n$ "), Started: true, AtPrompt: true}}}, 1000))
	golden.Check(t, "lost", text(&ran{untrusted: true, out: &terminals.Sent{Session: running(), Wait: terminals.WaitMarker,
		Captured: &terminals.Captured{Data: []byte("bash: eval: command not found\r\n"), Started: true, Ended: true, Rest: "lost"}}}, 1000))
	golden.Check(t, "fresh", text(&ran{freshShell: true, notes: []string{noteFresh}, ended: true, out: &terminals.Sent{Session: running(), Wait: terminals.WaitMarker,
		Captured: &terminals.Captured{Data: []byte("hi\r\n\r\n"), Started: true, Ended: true, Rest: "0"}}}, 1000))
	code := int32(3)
	golden.Check(t, "exited", text(&ran{freshShell: true, notes: []string{noteGone}, out: &terminals.Sent{Session: &terminals.Session{Id: "t1-0123456789ab", Status: "exited", ExitCode: &code}, Wait: terminals.WaitSessionExit,
		Captured: &terminals.Captured{Data: []byte("bye\r\nexit\r\n"), Started: true}}}, 1000))
	golden.Check(t, "stopped", text(&ran{out: &terminals.Sent{Session: running(), Wait: terminals.WaitInferredIdle, WaitDetail: "pid 9 sh: stopped (state T)",
		Captured: &terminals.Captured{Started: true}}}, 1000))
	// A line the shell cut short (PowerShell's terminating error): the
	// prompt after it is not the command's.
	golden.Check(t, "cut-short", text(&ran{ended: true, status: 1, promptLast: true, out: &terminals.Sent{Session: running(), Wait: terminals.WaitStdinRead,
		Captured: &terminals.Captured{Data: []byte("before\r\nException: boom\r\n\x1b]133;A;dsh=0123\aPS> \x1b[6n"), Started: true, AtPrompt: true}}}, 1000))
	golden.Check(t, "error-too-many", errorResult(sentence(terminals.Errorf(terminals.ErrTooMany, "x"))).Text)
	golden.Check(t, "error-aborted", errorResult(sentence(context.Canceled)).Text)
}
