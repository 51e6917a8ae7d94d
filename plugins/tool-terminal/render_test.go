package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/internal/golden"
)

func code(n int32) *int32 { return &n }

func TestRenderSent(t *testing.T) {
	s := &terminals.Session{Id: "t3-0123456789ab", Status: "running", Cols: 120, Rows: 40}
	golden.Check(t, "send-stdin-read", renderSent(&terminals.Sent{Session: s, Wait: terminals.WaitStdinRead, WaitDetail: "pid 123 cat: read on fd 0 (/dev/pts/4)",
		Screen: &terminals.Screen{Viewport: "$ cat\nhello\nhello", Scrollback: "line 1\nline 2\n", ScrollbackOmittedLines: 1234, ScrollbackOmittedChars: 56789}}))
	golden.Check(t, "send-timeout", renderSent(&terminals.Sent{Session: s, Wait: terminals.WaitTimeout, WaitDetail: "still running after 500ms; pid 9 sleep: in clock_nanosleep",
		Screen: &terminals.Screen{Viewport: "$ sleep 5"}}))
	golden.Check(t, "send-exit", renderSent(&terminals.Sent{Session: &terminals.Session{Id: "t3-0123456789ab", Status: "exited", ExitCode: code(0)}, Wait: terminals.WaitSessionExit,
		Screen: &terminals.Screen{Viewport: "$ exit\nexit"}}))
	golden.Check(t, "read-alt-screen", renderRead(&terminals.Output{Session: s, Screen: &terminals.Screen{Viewport: "line one\nline two\n:", AltScreen: true, ViewportOmittedLines: 2, ViewportOmittedChars: 80}}))
}

// Each error of the taxonomy is one bracketed sentence in plain words.
func TestErrorSentences(t *testing.T) {
	var out []string
	for _, err := range []error{
		terminals.Errorf(terminals.ErrNoSession, "no terminal session \"t9\""),
		terminals.Errorf(terminals.ErrSendActive, "in flight"),
		terminals.Errorf(terminals.ErrTooMany, "128 open"),
		terminals.Errorf(terminals.ErrDuplicateName, "dup"),
		terminals.Errorf(terminals.ErrNoBackend, "none"),
		terminals.Errorf(terminals.ErrOwnerNotLive, "gone"),
		terminals.Errorf(terminals.ErrServiceDisposing, "stopping"),
		terminals.Errorf(terminals.ErrShellKill, "SIGKILL for the shell of session t9 is refused"),
		terminals.Errorf(terminals.ErrInvalid, `signal "SIGKILL9": one of SIGINT, SIGTERM, SIGKILL, SIGTSTP, SIGHUP`),
		errors.New("something else"),
	} {
		r := failed(err, "t9")
		if !r.IsError {
			t.Errorf("%v is no error result", err)
		}
		var f map[string]string
		if json.Unmarshal(r.Structured, &f) != nil || "["+f["error"]+"]" != r.Text {
			t.Errorf("structured %s for %q", r.Structured, r.Text)
		}
		for _, w := range []string{"rpc", "grpc", "status", "code =", "NOT_FOUND", "ABORTED"} {
			if strings.Contains(r.Text, w) {
				t.Errorf("%q says %q", r.Text, w)
			}
		}
		out = append(out, r.Text)
	}
	golden.Check(t, "errors", strings.Join(out, "\n"))
}

// A name that is none of the caller's terminals says which there are (at
// most a few by name); one that could be several says which.
func TestNoTerminalSentences(t *testing.T) {
	a := &terminals.Session{Id: "t1-0123456789ab", Name: "build"}
	b := &terminals.Session{Id: "t2-ba9876543210"}
	c := &terminals.Session{Id: "t3-00112233aabb", Name: "t2"}
	var many []*terminals.Session
	for i := range 10 {
		many = append(many, &terminals.Session{Id: fmt.Sprintf("t%d-0123456789ab", i+1)})
	}
	golden.Check(t, "no-terminal", strings.Join([]string{
		noTerminal("t9", nil),
		noTerminal("web", []*terminals.Session{a, b}),
		noTerminal("t99", many),
		ambiguous("t2", []*terminals.Session{b, c}),
	}, "\n"))
	for _, tc := range []struct {
		id, given string
		want      bool
	}{
		{"t1-0123456789ab", "t1", true},
		{"t1-0123456789ab", "t1-0123", true},
		{"t1-0123456789ab", "t1-0123456789ab", true},
		{"t12-0123456789ab", "t1", false},
		{"t1-0123456789ab", "t1-9", false},
		{"t1-0123456789ab", "0123", false},
	} {
		if got := shortFor(tc.id, tc.given); got != tc.want {
			t.Errorf("shortFor(%s, %s) = %v", tc.id, tc.given, got)
		}
	}
}

// The schemas: no field beyond those declared, the defaults, and the
// signals the model may send.
func TestSpecs(t *testing.T) {
	specs := toolSpecs(30000)
	if len(specs) != 6 {
		t.Fatalf("%d tools", len(specs))
	}
	var all []string
	for i, s := range specs {
		if s.Name != toolNames[i] {
			t.Errorf("tool %d is %s, declared %s", i, s.Name, toolNames[i])
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s.InputSchema), &m); err != nil || m["additionalProperties"] != false {
			t.Errorf("%s: %s", s.Name, s.InputSchema)
		}
		all = append(all, s.Name+" "+s.InputSchema)
	}
	if !strings.Contains(specs[1].InputSchema, `"enum":["SIGINT","SIGTERM","SIGKILL","SIGTSTP","SIGHUP"]`) || !strings.Contains(specs[1].InputSchema, `"maximum":30000`) {
		t.Errorf("terminal_send: %s", specs[1].InputSchema)
	}
	golden.Check(t, "schemas", strings.Join(all, "\n"))
}
