package persistentshell

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/tools/toolsv1"
)

// script is a ctx.terminals that answers each send with the next of its
// answers and records what it was asked.
type script struct {
	dialect string // what an opened session speaks
	sends   []*terminals.Sent
	reads   []*terminals.Output // Read's answers, the last one repeated
	asked   []string            // "open", "send <text>", "read", "signal", "close"
	// failSend, when set, answers a send of a line with an error instead.
	failSend func(text string) error
}

func (s *script) RegisterBackend(context.Context, string, string) error { return nil }

func (s *script) Open(_ context.Context, req *terminals.OpenRequest) (*terminals.Session, error) {
	s.asked = append(s.asked, "open")
	return &terminals.Session{Id: "t1-0123456789ab", Name: req.Name, Backend: "b", Dialect: s.dialect, Status: "running"}, nil
}

func (s *script) Send(_ context.Context, req *terminals.SendRequest) (*terminals.Sent, error) {
	s.asked = append(s.asked, "send "+req.Text)
	if s.failSend != nil {
		if err := s.failSend(req.Text); err != nil {
			return nil, err
		}
	}
	if req.Capture == nil {
		return &terminals.Sent{Session: running()}, nil
	}
	out := s.sends[0]
	s.sends = s.sends[1:]
	return out, nil
}

func (s *script) Read(context.Context, string, time.Duration, int) (*terminals.Output, error) {
	s.asked = append(s.asked, "read")
	out := s.reads[0]
	if len(s.reads) > 1 {
		s.reads = s.reads[1:]
	}
	return out, nil
}

func (s *script) Signal(context.Context, string, string, terminals.Target) (*terminals.Signalled, error) {
	s.asked = append(s.asked, "signal")
	return &terminals.Signalled{}, nil
}

func (s *script) Resize(context.Context, string, int, int) (*terminals.Session, error) {
	return nil, nil
}

func (s *script) Close(context.Context, string) (*terminals.Session, error) {
	s.asked = append(s.asked, "close")
	return &terminals.Session{}, nil
}

func (s *script) List(context.Context) ([]*terminals.Session, error) { return nil, nil }

// confirming is a dialect with a confirming line, as PowerShell's.
type confirming struct{}

func (confirming) Type(command string, n Nonces) Typed {
	return Typed{Line: Line{Text: "run " + command, From: "S", Until: "D:"}, Confirm: &Line{Text: "confirm", From: "D", Until: "E:"}}
}

func (confirming) Status(rest string) (int, bool) {
	switch rest {
	case "ok", "0":
		return 0, true
	case "1":
		return 1, true
	}
	return 0, false
}

func (confirming) Tool(Config) *toolsv1.ToolSpec { return nil }

func (confirming) Shell() Shell {
	return Shell{Dialect: "pwsh", Interrupt: "Ctrl-C", InterruptKeys: "\x03", AwaitPrompt: true, CutShort: true}
}

func newScripted(s *script) *persistent {
	d := confirming{}
	return &persistent{plugin: Plugin{Name: "tool-x", Dialect: d}, shell: d.Shell(), cfg: Config{ToolName: "x", MaxOutputChars: 1000}, terms: s, owners: map[string]*ownerShell{}}
}

func marker(data, rest string) *terminals.Sent {
	return &terminals.Sent{Session: running(), Wait: terminals.WaitMarker, Captured: &terminals.Captured{Data: []byte(data), Started: true, Ended: true, Rest: rest}}
}

var atPrompt = &terminals.Output{Session: running(), Data: []byte("PS> "), AtPrompt: true}

// A command of a dialect that confirms its end: the fresh shell's prompt
// awaited, the command typed, then the confirming line, whose end gives
// the status; a confirmation with anything between its markers, and a
// done marker that says the shell cannot be trusted, close the shell.
func TestRunConfirmed(t *testing.T) {
	for _, c := range []struct {
		name  string
		sends []*terminals.Sent
		text  string
		asked string
	}{
		{"confirmed", []*terminals.Sent{marker("out\r\n", "ok"), marker("", "1")},
			noteFresh + "\nout\n[exit code: 1]", "open read send run cmd send confirm"},
		{"a done marker printed early", []*terminals.Sent{marker("out\r\n", "ok"), marker("PS> confirm\r\n", "0")},
			noteFresh + "\nout\n[the shell did not report how the command ended", "open read send run cmd send confirm close"},
		{"a reader of the next line", []*terminals.Sent{marker("out\r\n", "lost")},
			noteFresh + "\nout\n[the shell did not report how the command ended", "open read send run cmd close"},
		{"cut short", []*terminals.Sent{
			{Session: running(), Wait: terminals.WaitStdinRead, Captured: &terminals.Captured{Data: []byte("Exception: boom\r\n\x1b]133;A;dsh=1\aPS> "), Started: true, AtPrompt: true}},
			marker("", "1")},
			noteFresh + "\nException: boom\n[exit code: 1]", "open read send run cmd send confirm"},
		{"a nested prompt", []*terminals.Sent{
			{Session: running(), Wait: terminals.WaitStdinRead, Captured: &terminals.Captured{Data: []byte("\x1b]133;A;dsh=1\aPS> "), Started: true, AtPrompt: true}},
			marker("", "nested")},
			noteFresh + "\nPS> \n[the shell did not report how the command ended", "open read send run cmd send confirm close"},
		{"never started", []*terminals.Sent{{Session: running(), Wait: terminals.WaitStdinRead, Captured: &terminals.Captured{Data: []byte("PS> "), AtPrompt: true}}},
			noteFresh + "\n[the shell did not report how the command ended", "open read send run cmd close"},
	} {
		s := &script{dialect: "pwsh", sends: c.sends, reads: []*terminals.Output{{Session: running()}, atPrompt}}
		p := newScripted(s)
		r, err := p.run(context.Background(), p.shellOf("agent"), "cmd", 1000)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text, _ := r.render(1000)
		asked := strings.Join(s.asked, " ")
		asked = strings.Replace(asked, "read read", "read", 1)
		if !strings.HasPrefix(text, c.text) || asked != c.asked {
			t.Errorf("%s:\n text %q\nasked %q", c.name, text, asked)
		}
	}
}

// A shell not known to be at its prompt is interrupted by the dialect's
// keys, and a session of another dialect is closed, the call failing.
func TestRunInterruptAndDialect(t *testing.T) {
	s := &script{dialect: "pwsh", sends: []*terminals.Sent{marker("", "ok"), marker("", "0")}, reads: []*terminals.Output{atPrompt}}
	p := newScripted(s)
	sh := p.shellOf("agent")
	sh.id = "t1-0123456789ab"
	r, err := p.run(context.Background(), sh, "cmd", 1000)
	if err != nil || r.freshShell || len(r.notes) != 0 || !strings.Contains(strings.Join(s.asked, " "), "send \x03") || strings.Contains(strings.Join(s.asked, " "), "signal") {
		t.Fatalf("a shell found unclean: %v %+v %q", err, r, s.asked)
	}

	s = &script{dialect: "bash", reads: []*terminals.Output{atPrompt}}
	p = newScripted(s)
	if _, err := p.run(context.Background(), p.shellOf("agent"), "cmd", 1000); err == nil || !strings.Contains(sentence(err), "starts bash shells, and this tool needs a pwsh one") || strings.Join(s.asked, " ") != "open close" {
		t.Fatalf("a bash session for a pwsh tool: %v %q", err, s.asked)
	}
}

// A confirming line that cannot be sent after the command ran: the
// command's output, with the shell closed as untrusted, rather than an
// error that could have the command run again; a call cancelled then
// fails, its shell closed with it (CloseOnCancel).
func TestRunConfirmFails(t *testing.T) {
	s := &script{dialect: "pwsh", sends: []*terminals.Sent{marker("out\r\n", "ok")}, reads: []*terminals.Output{{Session: running()}, atPrompt},
		failSend: func(text string) error {
			if text == "confirm" {
				return errors.New("the terminal service broke down")
			}
			return nil
		}}
	p := newScripted(s)
	sh := p.shellOf("agent")
	r, err := p.run(context.Background(), sh, "cmd", 1000)
	if err != nil {
		t.Fatal(err)
	}
	text, f := r.render(1000)
	asked := strings.Replace(strings.Join(s.asked, " "), "read read", "read", 1)
	if !strings.HasPrefix(text, noteFresh+"\nout\n[the shell did not report how the command ended") || !f.Untrusted || !f.ShellClosed || !r.failed() ||
		asked != "open read send run cmd send confirm close" || sh.id != "" {
		t.Fatalf("a confirming line not sent:\n text %q\nasked %q\n  id %q", text, asked, sh.id)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s = &script{dialect: "pwsh", sends: []*terminals.Sent{marker("out\r\n", "ok")}, reads: []*terminals.Output{{Session: running()}, atPrompt},
		failSend: func(text string) error {
			if text == "confirm" {
				cancel()
				return context.Canceled
			}
			return nil
		}}
	p = newScripted(s)
	sh = p.shellOf("agent")
	if _, err := p.run(ctx, sh, "cmd", 1000); !errors.Is(err, context.Canceled) || sh.id != "" || sh.clean {
		t.Fatalf("a cancelled call: %v, id %q", err, sh.id)
	}
}
