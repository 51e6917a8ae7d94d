package screen

import (
	"strings"
	"testing"
	"time"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/syncbuf"
)

// Margins wider or taller than the screen, as a program sets them for the
// size it last knew (the terminal was made smaller since), followed by
// what moves cells inside them: each of these took the emulator past the
// end of a row or of the screen.
func TestMarginsPastTheScreen(t *testing.T) {
	wide := "\x1b[?69h\x1b[1;80s" // left and right margins 1 to 80
	tall := "\x1b[1;50r"          // top and bottom margins 1 to 50
	for _, c := range []struct{ name, margins, then string }{
		{"insert line", wide, "\x1b[L"},
		{"delete line", wide, "\x1b[M"},
		{"insert character", wide, "\x1b[@"},
		{"scroll up", wide, "\x1b[5S"},
		{"scroll down", wide, "\x1b[5T"},
		{"line feeds", wide, strings.Repeat("\r\n", 30)},
		{"reverse index", tall, "\x1bM\x1bM"},
		{"line feeds at the bottom", tall, "\x1b[50;1H" + strings.Repeat("\r\n", 30)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScreen(t, 80, 24, nil)
			s.noPlain = true
			s.Resize(40, 24)
			feed(t, s, "top\r\n"+c.margins+c.then+"after")
			r := s.Read(10000)
			if !strings.Contains(r.Viewport, "after") || strings.Contains(r.Unread.Text, "[terminal:") {
				t.Errorf("read: %+v", r)
			}
		})
	}
}

// A right margin past the screen is its right edge, as xterm takes it:
// an inserted character pushes the row's end off at the screen's edge.
func TestWideRightMarginIsTheEdge(t *testing.T) {
	s := newScreen(t, 10, 3, nil)
	feed(t, s, "0123456789\x1b[?69h\x1b[1;80s\x1b[1;1H\x1b[@x")
	if r := s.Read(1000); r.Viewport != "x012345678" {
		t.Errorf("viewport %q", r.Viewport)
	}
}

// Counts a program may set to two thousand million, which the emulator
// loops over one by one, are cut to what the screen can show: each write
// ends at once, and shows what the full count would have.
func TestHugeCountsAreCut(t *testing.T) {
	const huge = "2147483646"
	for _, c := range []struct{ name, out, want string }{
		{"repeat", "a\x1b[" + huge + "b", "aaaaaaaaaa\naaaaaaaaaa\naaaaaaa"}, // 2147483647 a: 7 on the last row
		{"erase characters", "0123456789\x1b[1;3H\x1b[" + huge + "X", "01"},
		{"tab forward", "\x1b[" + huge + "Ix", "         x"},
		{"tab back", "\x1b[1;10H\x1b[" + huge + "Zx", "x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Not closed when the write does not end: Close would wait
			// for it.
			s := New(10, 3, nil)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = s.Write([]byte(c.out))
			}()
			bounded.Receive(t, done, "the write")
			defer s.Close()
			if vp := s.Viewport(); vp != c.want {
				t.Errorf("viewport %q, want %q", vp, c.want)
			}
		})
	}
}

// panicOn makes the emulator panic on CSI z, as it would on a sequence
// it fails on, until the screen is reset (the fresh emulator does not
// have it).
func panicOn(s *Screen) {
	s.emu.RegisterCsiHandler('z', func(ansi.Params) bool { panic("the emulator failed") })
}

// A panic of the emulator's on what a program printed resets the screen:
// what it showed that was not read becomes unread, then a note says so,
// the owner is told, and the screen goes on with the next output at the
// same size, answering queries as before.
func TestPanicResetsTheScreen(t *testing.T) {
	var replies syncbuf.Buffer
	s := newScreen(t, 20, 5, &replies)
	var failures []Failure
	s.OnReset(func(f Failure) { failures = append(failures, f) })
	feed(t, s, "a\r\nb\r\n")
	s.Read(1000) // a and b are seen
	panicOn(s)
	feed(t, s, "c\r\nd\x1b[zlost")
	if len(failures) != 1 || failures[0].Op != "write" || failures[0].Panic != "the emulator failed" || !strings.Contains(string(failures[0].Stack), "panicOn") {
		t.Fatalf("failures: %+v", failures)
	}
	feed(t, s, "e\r\nf\x1b[6n")
	r := s.Read(1000)
	if want := "c\nd\n" + noteOutput + "\n"; r.Unread.Text != want {
		t.Errorf("unread %q, want %q", r.Unread.Text, want)
	}
	if r.Viewport != "e\nf" || r.CursorRow != 1 || r.CursorCol != 1 {
		t.Errorf("after the reset: %+v", r)
	}
	if c, rw := s.Size(); c != 20 || rw != 5 {
		t.Errorf("size %d×%d", c, rw)
	}
	// The fresh emulator answers the cursor position query.
	deadline := time.Now().Add(bounded.Bound)
	for replies.String() != "\x1b[2;2R" {
		if time.Now().After(deadline) {
			t.Fatalf("reply %q, want the cursor position report", replies.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A panic while the screen is looked at (the plain lines held back are
// fed to the emulator then) or resized resets it too, and the call still
// answers, from the fresh screen.
func TestPanicInReadOrResize(t *testing.T) {
	for _, op := range []string{"read", "resize"} {
		t.Run(op, func(t *testing.T) {
			s := newScreen(t, 20, 5, nil)
			var failures []Failure
			s.OnReset(func(f Failure) { failures = append(failures, f) })
			feed(t, s, numbered(1, 3*5+2))
			if !s.plain.on {
				t.Fatal("the plain lines are not held")
			}
			// The next look or resize feeds the held lines to the
			// emulator, which moves its cursor.
			s.emu.SetCallbacks(vt.Callbacks{CursorPosition: func(_, _ uv.Position) { panic("the emulator failed") }})
			note := noteOutput
			if op == "resize" {
				note = noteResize
				s.Resize(30, 4)
			}
			r := s.Read(1000)
			if len(failures) != 1 || failures[0].Op != op {
				t.Fatalf("failures: %+v", failures)
			}
			if want := lines(1, 17) + note + "\n"; r.Unread.Text != want || r.Viewport != "" {
				t.Errorf("read %+v, want unread %q", r, want)
			}
			if c, rw := s.Size(); op == "resize" && (c != 30 || rw != 4) {
				t.Errorf("size %d×%d", c, rw)
			}
			feed(t, s, "next")
			if vp := s.Viewport(); vp != "next" {
				t.Errorf("viewport %q", vp)
			}
		})
	}
}
