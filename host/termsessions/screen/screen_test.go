package screen

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dshrun/dsh/internal/syncbuf"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// feed writes b to s, failing the test on an error.
func feed(t *testing.T, s *Screen, b string) {
	t.Helper()
	if n, err := s.Write([]byte(b)); err != nil || n != len(b) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(b))
	}
}

func newScreen(t *testing.T, cols, rows int, reply io.Writer) *Screen {
	t.Helper()
	s := New(cols, rows, reply)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// numbered is n lines "1" … "n", each ended by CR LF as a tty sends them.
func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d\r\n", i)
	}
	return b.String()
}

func lines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

func TestScrolledLinesAreUnreadOnce(t *testing.T) {
	s := newScreen(t, 20, 5, nil)
	feed(t, s, numbered(1, 10))
	r := s.Read(1000)
	if want := lines(1, 6); r.Unread.Text != want {
		t.Errorf("Unread = %q, want %q", r.Unread.Text, want)
	}
	if r.Unread.Lines != 6 || r.Unread.OmittedLines != 0 || r.Unread.OmittedChars != 0 {
		t.Errorf("Unread counts = %+v", r.Unread)
	}
	if want := "7\n8\n9\n10"; r.Viewport != want {
		t.Errorf("Viewport = %q, want %q", r.Viewport, want)
	}
	if r := s.Read(1000); r.Unread.Text != "" || r.Unread.Lines != 0 {
		t.Errorf("second Read handed out %q again", r.Unread.Text)
	}
	// 7 and 8 were on the screen at the last Read: scrolling them off does
	// not make them unread.
	feed(t, s, numbered(11, 12))
	if u := s.Unread(1000); u.Text != "" {
		t.Errorf("rows seen on the screen came back as unread: %q", u.Text)
	}
	// 9 and 10 were on it too; 11 and on were not.
	feed(t, s, numbered(13, 20))
	if u := s.Unread(1000); u.Text != lines(11, 16) {
		t.Errorf("Unread = %q, want %q", u.Text, lines(11, 16))
	}
}

func TestUnreadWithoutReadKeepsEverything(t *testing.T) {
	s := newScreen(t, 20, 5, nil)
	feed(t, s, numbered(1, 10))
	if u := s.Unread(1000); u.Text != lines(1, 6) {
		t.Errorf("Unread = %q", u.Text)
	}
	// Unread alone does not count the screen as seen.
	feed(t, s, numbered(11, 12))
	if u := s.Unread(1000); u.Text != lines(7, 8) {
		t.Errorf("Unread = %q, want %q", u.Text, lines(7, 8))
	}
}

// checkExact checks that what Unread shows and omits adds up to total.
func checkExact(t *testing.T, u Unread, totalLines, totalChars int) {
	t.Helper()
	if got := u.Lines + u.OmittedLines; got != totalLines {
		t.Errorf("Lines %d + OmittedLines %d = %d, want %d", u.Lines, u.OmittedLines, got, totalLines)
	}
	if got := utf8.RuneCountInString(u.Text) + u.OmittedChars; got != totalChars {
		t.Errorf("chars %d + OmittedChars %d = %d, want %d", utf8.RuneCountInString(u.Text), u.OmittedChars, got, totalChars)
	}
}

func TestUnreadBudget(t *testing.T) {
	// 100 lines on 5 rows: 97…100 and the cursor's blank row stay.
	all := lines(1, 96)
	for _, budget := range []int{0, 1, 2, 3, 10, 11, 12, 100, len(all) - 1, len(all), len(all) + 1} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			s := newScreen(t, 20, 5, nil)
			feed(t, s, numbered(1, 100))
			u := s.Unread(budget)
			checkExact(t, u, 96, len(all))
			if !strings.HasSuffix(all, u.Text) {
				t.Errorf("Text %q is not the end of the unread lines", u.Text)
			}
			if n := utf8.RuneCountInString(u.Text); n > budget {
				t.Errorf("Text has %d code points, over the budget of %d", n, budget)
			}
			// Once the newest line fits, Text starts at a line.
			if budget >= len("96\n") && !strings.HasPrefix(u.Text, fmt.Sprint(96-u.Lines+1)+"\n") {
				t.Errorf("Text %q does not start at a line", u.Text)
			}
			if again := s.Unread(1000); again.Text != "" || again.OmittedLines != 0 {
				t.Errorf("omitted lines came back: %+v", again)
			}
		})
	}
}

func TestUnreadCutInsideLongLine(t *testing.T) {
	s := newScreen(t, 40, 2, nil)
	feed(t, s, "abcdefghij\r\nx\r\n")
	u := s.Unread(5)
	if u.Text != "ghij\n" || u.Lines != 1 || u.OmittedLines != 0 || u.OmittedChars != 6 {
		t.Errorf("Unread = %+v, want the end of the one line", u)
	}
}

func TestUnreadQueueIsBounded(t *testing.T) {
	s := newScreen(t, 20, 5, nil)
	n := MaxUnreadLines + 50
	feed(t, s, numbered(1, n+4))
	u := s.Unread(1 << 30)
	checkExact(t, u, n, len(lines(1, n)))
	if u.OmittedLines != 50 || !strings.HasSuffix(u.Text, fmt.Sprintf("\n%d\n", n)) {
		t.Errorf("OmittedLines = %d, end %q", u.OmittedLines, u.Text[len(u.Text)-12:])
	}
}

func TestReadBudgetViewportFirst(t *testing.T) {
	s := newScreen(t, 20, 5, nil)
	feed(t, s, numbered(1, 10)+"$ ")
	// The viewport "7\n8\n9\n10\n$" is 10 code points; 2 are left for unread.
	r := s.Read(12)
	if r.Viewport != "7\n8\n9\n10\n$" || r.Unread.Text != "6\n" {
		t.Errorf("Read = %q + %q", r.Unread.Text, r.Viewport)
	}
	checkExact(t, r.Unread, 6, len(lines(1, 6)))

	feed(t, s, "\r\n"+numbered(11, 16))
	// Over budget on its own: the viewport keeps its bottom rows.
	r = s.Read(6)
	if r.Viewport != "15\n16" || r.ViewportOmittedLines != 2 || r.ViewportOmittedChars != len("13\n14\n") {
		t.Errorf("Viewport = %q, omitted %d lines %d chars", r.Viewport, r.ViewportOmittedLines, r.ViewportOmittedChars)
	}
	if r.Unread.Text != "" || r.Unread.OmittedLines == 0 {
		t.Errorf("Unread = %+v, want all of it omitted", r.Unread)
	}
	// 13 and 14 were not shown: when they scroll off, they are unread.
	feed(t, s, numbered(17, 20))
	if u := s.Unread(100); u.Text != "13\n14\n" {
		t.Errorf("Unread = %q, want the rows the cut viewport left out", u.Text)
	}
}

func TestClearKeepsUnreadAndDropsSeen(t *testing.T) {
	const clear = "\x1b[H\x1b[2J\x1b[3J" // what clear(1) sends for xterm-256color
	s := newScreen(t, 20, 6, nil)
	feed(t, s, "$ seq 3\r\n1\r\n2\r\n3\r\n$ ")
	s.Read(1000)
	feed(t, s, "clear\r\n"+clear+"$ ")
	r := s.Read(1000)
	if r.Viewport != "$" {
		t.Errorf("Viewport after clear = %q", r.Viewport)
	}
	// The rows the model saw are not handed out; the changed prompt row is.
	if r.Unread.Text != "$ clear\n" {
		t.Errorf("Unread after clear = %q, want only the line typed since", r.Unread.Text)
	}
	// Output the model never saw survives a clear.
	feed(t, s, "echo hi; clear\r\nhi\r\n"+clear+"$ ")
	if r := s.Read(1000); r.Unread.Text != "$ echo hi; clear\nhi\n" || r.Viewport != "$" {
		t.Errorf("Read = %q + %q", r.Unread.Text, r.Viewport)
	}
}

func TestResetKeepsUnread(t *testing.T) {
	s := newScreen(t, 20, 6, nil)
	feed(t, s, "seen\r\n$ ")
	s.Read(1000)
	feed(t, s, "echo x; reset\r\nx\r\n\x1bc$ ")
	if r := s.Read(1000); r.Unread.Text != "$ echo x; reset\nx\n" || r.Viewport != "$" {
		t.Errorf("Read after a reset = %q + %q", r.Unread.Text, r.Viewport)
	}
}

func TestAltScreen(t *testing.T) {
	s := newScreen(t, 20, 4, nil)
	feed(t, s, "hello\r\n$ ")
	s.Read(1000)
	feed(t, s, "less\r\n\x1b[?1049h\x1b[H\x1b[2JFULL SCREEN")
	if !s.AltScreen() || s.Viewport() != "FULL SCREEN" {
		t.Fatalf("AltScreen %v, Viewport %q", s.AltScreen(), s.Viewport())
	}
	// Lines scrolled on the alternate screen never become unread.
	feed(t, s, numbered(1, 50))
	r := s.Read(1000)
	if !r.AltScreen || r.Unread.Text != "" {
		t.Errorf("alt screen Read: AltScreen %v, Unread %q", r.AltScreen, r.Unread.Text)
	}
	feed(t, s, "\x1b[?1049l$ ")
	r = s.Read(1000)
	if r.AltScreen || r.Viewport != "hello\n$ less\n$" {
		t.Errorf("back on the main screen: AltScreen %v, Viewport %q", r.AltScreen, r.Viewport)
	}
	// The main screen's rows read before the full-screen program still
	// count as seen.
	feed(t, s, "\r\n"+numbered(1, 3))
	if u := s.Unread(1000); u.Text != "" {
		t.Errorf("Unread = %q", u.Text)
	}
}

func TestWideCharactersAndColours(t *testing.T) {
	s := newScreen(t, 30, 3, nil)
	feed(t, s, "\x1b[1;31mred\x1b[0m \x1b[42mgreen\x1b[0m h\u00e9llo \u4e16\u754c ok\x1b[K")
	if got, want := s.Viewport(), "red green héllo 世界 ok"; got != want {
		t.Errorf("Viewport = %q, want %q", got, want)
	}
	// Each wide character takes two columns.
	if row, col, _ := s.Cursor(); row != 0 || col != len("red green héllo ")-1+4+3 {
		t.Errorf("Cursor = %d,%d", row, col)
	}
}

func TestTitle(t *testing.T) {
	s := newScreen(t, 20, 3, nil)
	feed(t, s, "\x1b]0;my title\x07x")
	if s.Title() != "my title" || s.Read(100).Title != "my title" {
		t.Errorf("Title = %q", s.Title())
	}
}

func TestResizeKeepsCursorLine(t *testing.T) {
	s := newScreen(t, 20, 10, nil)
	feed(t, s, numbered(1, 8)+"$ ")
	s.Resize(20, 4)
	if cols, rows := s.Size(); cols != 20 || rows != 4 {
		t.Errorf("Size = %d×%d", cols, rows)
	}
	if got := s.Viewport(); got != "6\n7\n8\n$" {
		t.Errorf("Viewport = %q", got)
	}
	if row, col, _ := s.Cursor(); row != 3 || col != 2 {
		t.Errorf("Cursor = %d,%d, want 3,2", row, col)
	}
	if u := s.Unread(100); u.Text != lines(1, 5) {
		t.Errorf("Unread = %q", u.Text)
	}
	s.Resize(10, 6)
	if got := s.Viewport(); got != "6\n7\n8\n$" {
		t.Errorf("Viewport after growing = %q", got)
	}
}

func TestResizeWideCharactersAndHalfSequence(t *testing.T) {
	s := newScreen(t, 20, 6, nil)
	feed(t, s, "世界 one\r\n世界 two\r\n世界 three\r\n$ \x1b[3")
	// The program's sequence is cut where the resize falls: it goes on
	// after, untouched.
	s.Resize(20, 2)
	feed(t, s, "1mbold\x1b[0m")
	if got := s.Viewport(); got != "世界 three\n$ bold" {
		t.Errorf("Viewport = %q", got)
	}
	if u := s.Unread(100); u.Text != "世界 one\n世界 two\n" {
		t.Errorf("Unread = %q", u.Text)
	}
}

func TestRepliesGoToTheWriter(t *testing.T) {
	var out syncbuf.Buffer
	s := newScreen(t, 20, 5, &out)
	feed(t, s, "\x1b[2;3H\x1b[6n") // cursor position report
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "\x1b[2;3R" {
		if time.Now().After(deadline) {
			t.Fatalf("reply = %q, want the cursor position report", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blocked is a reply writer that waits until released, as a PTY whose
// input queue is full does.
type blocked struct{ release chan struct{} }

func (b blocked) Write(p []byte) (int, error) {
	<-b.release
	return len(p), nil
}

func TestWriteDoesNotWaitOnReplies(t *testing.T) {
	w := blocked{release: make(chan struct{})}
	s := New(20, 5, w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			_, _ = s.Write([]byte("\x1b[6n\x1b[c"))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Write waited on a reply writer that does not take them")
	}
	if s.DroppedReplies() == 0 {
		t.Error("no reply counted as dropped with the writer stuck")
	}
	if s.Viewport() != "" {
		t.Errorf("Viewport = %q", s.Viewport())
	}
	close(w.release)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNilReplyDiscards(t *testing.T) {
	s := newScreen(t, 20, 5, nil)
	for range 300 {
		feed(t, s, "\x1b[6n")
	}
}

func TestWriteAfterClose(t *testing.T) {
	s := New(20, 5, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	s.Resize(30, 5) // no effect, no panic
}

// BenchmarkWrite feeds lines that scroll the main screen; BenchmarkWriteAlt
// the same on the alternate screen (whose scrolled lines the emulator keeps
// in a scrollback of its own, not exposed).
func BenchmarkWrite(b *testing.B) {
	benchWrite(b, "")
}

func BenchmarkWriteAlt(b *testing.B) {
	benchWrite(b, "\x1b[?1049h")
}

func benchWrite(b *testing.B, prefix string) {
	chunk := []byte(strings.Repeat("a line of some forty characters, and 123\r\n", 100))
	s := New(80, 24, nil)
	defer s.Close()
	_, _ = s.Write([]byte(prefix))
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if _, err := s.Write(chunk); err != nil {
			b.Fatal(err)
		}
		s.Unread(0)
	}
}
