package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/internal/testneeds"
)

func running() *terminals.Session {
	return &terminals.Session{Id: "t1-0123456789ab", Status: "running"}
}

func TestRender(t *testing.T) {
	text := func(r *ran, chars int) string { s, _ := r.render(chars); return s }
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
	golden.Check(t, "stdin-read", text(&ran{notes: []string{noteInterrupted}, out: &terminals.Sent{Session: running(), Wait: terminals.WaitStdinRead, WaitDetail: "pid 12 cat: read on fd 0 (/dev/pts/3)",
		Captured: &terminals.Captured{Data: []byte("before\r\nname? "), Started: true}}}, 1000))
	golden.Check(t, "stdin-read-prompt", text(&ran{untrusted: true, out: &terminals.Sent{Session: running(), Wait: terminals.WaitStdinRead,
		Captured: &terminals.Captured{Data: []byte("^C\r\n$ "), Started: true, AtPrompt: true}}}, 1000))
	golden.Check(t, "lost", text(&ran{untrusted: true, out: &terminals.Sent{Session: running(), Wait: terminals.WaitMarker,
		Captured: &terminals.Captured{Data: []byte("bash: eval: command not found\r\n"), Started: true, Ended: true, Rest: lostStatus}}}, 1000))
	golden.Check(t, "fresh", text(&ran{freshShell: true, notes: []string{noteFresh}, ended: true, out: &terminals.Sent{Session: running(), Wait: terminals.WaitMarker,
		Captured: &terminals.Captured{Data: []byte("hi\r\n\r\n"), Started: true, Ended: true, Rest: "0"}}}, 1000))
	code := int32(3)
	golden.Check(t, "exited", text(&ran{freshShell: true, notes: []string{noteGone}, out: &terminals.Sent{Session: &terminals.Session{Id: "t1-0123456789ab", Status: "exited", ExitCode: &code}, Wait: terminals.WaitSessionExit,
		Captured: &terminals.Captured{Data: []byte("bye\r\nexit\r\n"), Started: true}}}, 1000))
	golden.Check(t, "stopped", text(&ran{out: &terminals.Sent{Session: running(), Wait: terminals.WaitInferredIdle, WaitDetail: "pid 9 sh: stopped (state T)",
		Captured: &terminals.Captured{Started: true}}}, 1000))
	golden.Check(t, "error-too-many", errorResult(sentence(terminals.Errorf(terminals.ErrTooMany, "x"))).Text)
	golden.Check(t, "error-aborted", errorResult(sentence(context.Canceled)).Text)
	golden.Check(t, "description", description(config{ToolName: "bash", MaxOutputChars: 30000, DefaultTimeoutMs: 120000, MaxTimeoutMs: 600000}))
}

// What is typed runs the command as written in the shell itself, and
// neither marker is in it.
func TestTypedLine(t *testing.T) {
	testneeds.Command(t, "bash")
	for _, cmd := range []string{
		"echo hi",
		"printf '%s\\n' \"a b\" 'c\"d' $'e\\tf'",
		"x='!$`\\\\'; echo \"$x\"",
		"cat <<'EOF'\nline $HOME\n  indented\nEOF",
		"echo \\\n  joined; echo ä漢字🙂",
		"false",
		"cd / && pwd",
	} {
		line := typedLine(cmd, "abc123", "def456")
		if strings.Contains(line, startMarker("abc123")) || strings.Contains(line, endMarker("def456")) || strings.ContainsAny(line, "\r\n") {
			t.Fatalf("the typed line of %q shows a marker or breaks a line: %s", cmd, line)
		}
		want, _ := exec.Command("bash", "-c", cmd+"\necho \"status $?\"").CombinedOutput()
		got := runOnTerminalFile(t, line)
		// The start marker ends bash's message for an unset variable.
		if i := strings.Index(got, startMarker("abc123")); i >= 0 && !strings.Contains(got[:i], "\n") {
			got = got[i:]
		}
		wantFramed := startMarker("abc123") + "\n" + strings.TrimSuffix(string(want), "status "+lastStatus(string(want))+"\n") + "\n" + endMarker("def456") + lastStatus(string(want)) + "\n"
		if string(got) != wantFramed {
			t.Errorf("%q:\n got %q\nwant %q", cmd, got, wantFramed)
		}
	}
}

// runOnTerminalFile runs line in bash with one file open for reading and
// writing as its stdin, stdout and stderr, as a terminal is (the markers
// are written to the shell's stdin), and returns what was written.
func runOnTerminalFile(t *testing.T, line string) string {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "tty"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := exec.Command("bash", "-c", line)
	c.Stdin, c.Stdout, c.Stderr = f, f, f
	_ = c.Run()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastStatus(out string) string {
	i := strings.LastIndex(out, "status ")
	return strings.TrimSpace(out[i+len("status "):])
}
