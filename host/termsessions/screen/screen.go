// Package screen owns what one terminal shows, kept for a model to read: a
// terminal emulator fed with a PTY's output, the visible screen as plain
// text (the alternate screen while a full-screen program is on it), the
// cursor and the title, and the lines that went past the screen without
// being shown, each handed out once.
//
// A terminal is read by looking at it, not by reading a stream: a model that
// reads now sees the screen; what scrolled off the top (or what a clear
// wiped) since it last looked is "unread", and a read returns the newest of
// it within a budget of characters, with exact counts of what it left out.
// Lines the model saw on the screen at its last read are not handed out
// again when they later scroll off. A clear (ED 2, or a reset) moves the
// screen's rows into unread, and clearing the scrollback (ED 3, which
// clear(1) sends too) does not take unread lines away: they are output the
// model has not seen. A full-screen program's alternate screen has no
// scrollback, so what it shows is never unread. A row is a line: text
// longer than the screen is wide is as many lines as rows it took.
//
// Emulation costs: scrolling one line copies the whole screen's cells
// (about 20 µs at 80×24, 60 µs at 200×50); a program that prints faster
// than that is slowed to it through the PTY when the Screen is fed from
// the PTY reader. Runs of plain lines (plain.go), the bulk of most
// output, go past the emulator instead: only their last screenful is fed
// to it.
//
// What a program prints is untrusted, and the emulator has failed on some
// of it (margins past the screen, clampMargins): no output and no size may
// take the process down through it. Every call into the emulator runs
// under try, and a panic there resets the screen (reset): a fresh emulator
// of the same size, what the screen showed kept as unread lines, then a
// note the model reads, and the Screen's owner told (OnReset).
//
// The package does no I/O of its own but for one writer: the emulator's
// answers to terminal queries (cursor position, device attributes), which go
// back to the program through the PTY master, as a real terminal's would.
package screen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"

	"github.com/dshrun/dsh/sdk/modeltext"
)

// MaxUnreadLines bounds the unread lines a Screen holds. Past it the oldest
// go, and are counted as left out by the next read: a read returns the
// newest lines anyway, so this only bounds memory.
const MaxUnreadLines = 10000

// emuScrollback is the size of the emulator's own scrollback. The Screen
// moves its lines out after every piece it feeds, so it must never fill (a
// full one drops its oldest line on every push, at a cost linear in its size).
const emuScrollback = 1 << 16

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("screen: closed")

// Screen is one terminal's screen. Its methods are safe for concurrent use:
// one goroutine feeds the PTY's output while others read.
type Screen struct {
	mu     sync.Mutex
	emu    *vt.Emulator
	closed bool
	title  string
	// w and h are the size last asked for, in cells: a reset's fresh
	// emulator takes it from here, not from the one that failed.
	w, h    int
	onReset func(Failure)

	unread queue
	// seen holds the main screen's rows as the last Read showed them, top
	// first: a line pushed off the top that matches one of them was read.
	seen []string
	// tries counts the pushes off the top still to check against seen.
	tries int

	// plain holds runs of plain lines back from the emulator (plain.go);
	// noPlain (for tests) feeds everything to it.
	plain   plainState
	noPlain bool

	replies        chan []byte
	droppedReplies atomic.Int64
	readers        sync.WaitGroup // readReplies, one for each emulator
	wg             sync.WaitGroup // writeReplies
}

// New returns a screen of cols × rows cells. The emulator's replies to the
// program's terminal queries are copied to reply (the PTY master) by a
// goroutine of the Screen's own, so Write never waits on them; a nil reply
// discards them. Close ends that goroutine.
func New(cols, rows int, reply io.Writer) *Screen {
	s := &Screen{replies: make(chan []byte, 256)}
	s.start(max(cols, 1), max(rows, 1))
	if reply == nil {
		reply = io.Discard
	}
	s.wg.Add(1)
	go s.writeReplies(reply)
	return s
}

// start gives the Screen a fresh emulator of cols × rows, with the
// handlers the Screen watches the output through and a goroutine taking
// its replies.
func (s *Screen) start(cols, rows int) {
	s.w, s.h = cols, rows
	emu := vt.NewEmulator(cols, rows)
	s.emu = emu
	emu.SetScrollbackSize(emuScrollback)
	emu.SetCallbacks(vt.Callbacks{Title: func(t string) { s.title = t }})
	// Both erase-in-display forms touch the scrollback (ED 2 pushes the
	// screen into it, ED 3 empties it): move what is there out first, so
	// a clear never takes away lines the model has not read. Returning
	// false lets the emulator's own handler run next.
	emu.RegisterCsiHandler('J', func(ansi.Params) bool {
		s.drain()
		return false
	})
	// A full reset (RIS, as reset(1) sends) blanks the screens without
	// pushing anything: the main screen's rows go to unread first, as a
	// clear's do.
	emu.RegisterEscHandler('c', func() bool {
		s.plain.charset, s.plain.margins, s.plain.region = [4]bool{}, false, false
		s.drain()
		if !s.emu.IsAltScreen() {
			s.pushRows(s.rows())
		}
		return false
	})
	s.clampMargins()
	s.clampCounts()
	s.watchPlain()
	if s.closed {
		// A reset after Close: nothing takes replies any more, and the
		// emulator must not wait on them.
		s.stopReplies()
		return
	}
	s.readers.Add(1)
	go s.readReplies(emu)
}

// pushRows makes the main screen's rows unread lines, as a clear does,
// but for blank ones and those the last Read showed.
func (s *Screen) pushRows(rows []string) {
	for _, r := range rows {
		if r != "" && !s.wasSeen(r) {
			s.unread.push(r)
		}
	}
}

// readReplies takes emu's replies as it writes them (its Write waits for
// this) and queues them for writeReplies, until emu's pipe is closed. A
// program that floods queries without reading the answers loses the ones
// past the queue.
func (s *Screen) readReplies(emu *vt.Emulator) {
	defer s.readers.Done()
	buf := make([]byte, 4096)
	for {
		n, err := emu.Read(buf)
		if n > 0 {
			select {
			case s.replies <- bytes.Clone(buf[:n]):
			default:
				s.droppedReplies.Add(1)
			}
		}
		if err != nil {
			return
		}
	}
}

// stopReplies ends the current emulator's readReplies. The emulator's
// Close would set a flag its Read checks unlocked; the pipe's own close
// ends that Read just as well, without a race.
func (s *Screen) stopReplies() {
	if pw, ok := s.emu.InputPipe().(*io.PipeWriter); ok {
		_ = pw.Close()
	}
}

// writeReplies sends the queued replies to the program. It may wait on a
// PTY whose input queue is full, which is why it is not readReplies.
func (s *Screen) writeReplies(w io.Writer) {
	defer s.wg.Done()
	failed := false
	for b := range s.replies {
		if failed {
			continue // the terminal is gone: drain what is left
		}
		if _, err := w.Write(b); err != nil {
			failed = true
		}
	}
}

// DroppedReplies counts replies to terminal queries that were not sent,
// because the program asked faster than they could be written back.
func (s *Screen) DroppedReplies() int64 { return s.droppedReplies.Load() }

// Close stops the reply goroutines and waits for them. Replies already
// queued are still written; if writing one waits on a full PTY input
// queue, Close waits too, until the PTY master is closed.
func (s *Screen) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.stopReplies()
	s.mu.Unlock()
	s.readers.Wait()
	close(s.replies)
	s.wg.Wait()
	return nil
}

// Write feeds output of the program running in the terminal. When the
// emulator fails on it, the screen is reset (see reset) and the rest of p
// is dropped from the screen: the program's output itself is not the
// Screen's to keep.
func (s *Screen) Write(p []byte) (n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	if !s.try("write", func() { n, err = s.write(p) }) {
		return len(p), nil
	}
	return n, err
}

func (s *Screen) write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if s.plain.on {
			p = p[s.takePlain(p):]
			if len(p) == 0 {
				break
			}
			s.flush()
		}
		n, err := s.writeEmu(p)
		if err != nil {
			return total - len(p), fmt.Errorf("screen: emulator write: %w", err)
		}
		p = p[n:]
	}
	return total, nil
}

// Resize changes the screen to cols × rows. When it gets shorter than the
// cursor's row, the main screen scrolls up first so the cursor's line (a
// shell's prompt) stays in sight, as xterm does; the rows that scroll off
// become unread lines.
func (s *Screen) Resize(cols, rows int) {
	cols, rows = max(cols, 1), max(rows, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.w, s.h = cols, rows // a reset's size, should this fail
	s.try("resize", func() { s.resize(cols, rows) })
}

func (s *Screen) resize(cols, rows int) {
	s.flush()
	if !s.emu.IsAltScreen() {
		if k := s.emu.CursorPosition().Y - (rows - 1); k > 0 {
			s.scrollUp(k)
		}
	}
	// The emulator keeps the top rows and puts a cursor below them on the
	// last: after scrollUp, that is the cursor's own line.
	s.emu.Resize(cols, rows)
	s.plain.region = false // the emulator's Resize resets the margins
}

// scrollUp moves the main screen's rows up by k, the top k becoming
// unread lines as if scrolled off. It goes cell by cell rather than
// through the emulator's parser, which may be inside a sequence the
// program has only half written.
func (s *Screen) scrollUp(k int) {
	h, w := s.emu.Height(), s.emu.Width()
	for _, r := range s.rows()[:min(k, h)] {
		if !s.wasSeen(r) {
			s.unread.push(r)
		}
	}
	for y := range h {
		for x := range w {
			if y+k >= h {
				s.emu.SetCell(x, y, nil)
				continue
			}
			// A wide character's second cell follows from its first:
			// setting that placeholder would blank the character.
			if c := s.emu.CellAt(x, y+k); c != nil && !c.IsZero() {
				cp := *c
				s.emu.SetCell(x, y, &cp)
			}
		}
	}
}

// Size returns the screen's columns and rows.
func (s *Screen) Size() (cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w, s.h
}

// Cursor returns the cursor's row and column, counted from 0 at the top
// left, and whether the program hid it.
func (s *Screen) Cursor() (row, col int, hidden bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.look(func() {
		s.flush()
		p := s.emu.CursorPosition()
		row, col, hidden = p.Y, p.X, s.emu.CursorHidden()
	})
	return row, col, hidden
}

// Title returns the window title the program last set (OSC 0 or 2).
func (s *Screen) Title() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.title
}

// AltScreen reports whether a full-screen program has the alternate screen.
func (s *Screen) AltScreen() (alt bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.look(func() { alt = s.emu.IsAltScreen() })
	return alt
}

// Viewport returns the visible screen as a person would read it: one line
// per row, right-trimmed, without the blank rows at the bottom, with no
// escape codes. While a full-screen program (less, vim, top) has the
// alternate screen, that is what it shows. It consumes nothing.
func (s *Screen) Viewport() (vp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.look(func() {
		s.flush()
		vp = joinRows(s.rows())
	})
	return vp
}

// rows returns the visible screen's rows as text, top first.
func (s *Screen) rows() []string {
	h, w := s.emu.Height(), s.emu.Width()
	rows := make([]string, h)
	var b strings.Builder
	for y := range h {
		b.Reset()
		for x := range w {
			appendCell(&b, s.emu.CellAt(x, y))
		}
		rows[y] = strings.TrimRight(b.String(), " ")
	}
	return rows
}

// joinRows joins rows with newlines, leaving out the blank ones at the end.
func joinRows(rows []string) string {
	n := len(rows)
	for n > 0 && rows[n-1] == "" {
		n--
	}
	return strings.Join(rows[:n], "\n")
}

// appendCell writes what a cell shows. A wide character's second cell is
// the zero cell and shows nothing: the first one already took both columns.
func appendCell(b *strings.Builder, c *uv.Cell) {
	switch {
	case c == nil || c.IsZero():
	case c.Content == "":
		b.WriteByte(' ')
	default:
		b.WriteString(c.Content)
	}
}

// lineText is a scrollback line as text, right-trimmed.
func lineText(l uv.Line) string {
	var b strings.Builder
	for i := range l {
		appendCell(&b, &l[i])
	}
	return strings.TrimRight(b.String(), " ")
}

// drain moves the lines the emulator pushed into its scrollback to the
// unread queue, leaving out those the last Read showed. Only the main
// screen has a scrollback the emulator exposes: the alternate screen's
// lines are not kept, as a terminal keeps none of them.
func (s *Screen) drain() {
	sb := s.emu.Scrollback()
	if sb.Len() == 0 {
		return
	}
	for _, l := range sb.Lines() {
		t := lineText(l)
		if !s.wasSeen(t) {
			s.unread.push(t)
		}
	}
	sb.Clear()
}

// wasSeen reports whether a line pushed off the main screen is one the last
// Read showed, and takes it and the rows above it out of seen. Rows leave
// the screen top first, but a clear pushes only the rows that are not blank,
// and a scroll region the rows from its top; so a line with text matches
// the first seen row with the same text, and a blank line only a blank
// row at the top of what is left. Every row on the screen at the read has
// left it, or been written over, after as many pushes as there were rows:
// then nothing more can match.
func (s *Screen) wasSeen(t string) bool {
	if s.tries == 0 {
		return false
	}
	s.tries--
	defer func() {
		if s.tries == 0 {
			s.seen = nil
		}
	}()
	if t == "" {
		if len(s.seen) > 0 && s.seen[0] == "" {
			s.seen = s.seen[1:]
			return true
		}
		return false
	}
	for j, r := range s.seen {
		if r == t {
			s.seen = s.seen[j+1:]
			return true
		}
	}
	return false
}

// Unread is the part of the output that went past the screen without being
// shown (scrolled off the top, or wiped by a clear), as one read hands it
// out. Text holds the newest of those lines, oldest first, each ending in a
// newline; a line longer than the screen is wide is as many lines as rows
// it took. What was left out comes before Text and is not handed out again.
type Unread struct {
	Text string
	// Lines counts the lines in Text; one cut at its start counts.
	Lines int
	// OmittedLines counts the whole lines left out; OmittedChars the code
	// points left out, newlines included (and the start of a line cut in
	// two). Lines+OmittedLines and the code points of Text plus
	// OmittedChars are all the unread output.
	OmittedLines, OmittedChars int
}

// Unread hands out the unread lines: the newest that fit in budget code
// points, and counts of the rest. Every unread line is consumed, shown or
// not. It does not count the screen as seen; Read does.
func (s *Screen) Unread(budget int) Unread {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unread.take(budget)
}

// Read is what one look at the terminal shows a model.
type Read struct {
	// Unread is what went past the screen since the last read.
	Unread Unread
	// Viewport is the visible screen, as Viewport returns it. When it alone
	// is over the budget, its top rows are left out: ViewportOmittedLines
	// of them, ViewportOmittedChars code points with their newlines.
	Viewport                                   string
	ViewportOmittedLines, ViewportOmittedChars int
	// AltScreen is whether Viewport is a full-screen program's alternate
	// screen (whose lines never become unread).
	AltScreen bool
	// CursorRow and CursorCol count from 0 at the top left.
	CursorRow, CursorCol int
	CursorHidden         bool
	Title                string
}

// Read returns the viewport and the unread lines within budget code points
// together, at one instant. The viewport comes first: the unread lines get
// what it leaves of the budget. It consumes the unread lines, and counts
// the main screen, as it is shown, as seen: those rows are not handed out
// as unread when they scroll off later.
func (s *Screen) Read(budget int) (r Read) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.look(func() { r = s.read(budget) })
	return r
}

func (s *Screen) read(budget int) Read {
	s.flush()
	budget = max(budget, 0)
	rows := s.rows()
	p := s.emu.CursorPosition()
	r := Read{
		AltScreen:    s.emu.IsAltScreen(),
		CursorRow:    p.Y,
		CursorCol:    p.X,
		CursorHidden: s.emu.CursorHidden(),
		Title:        s.title,
	}
	vp := joinRows(rows)
	shown := rows // the rows the model sees whole
	if n := utf8.RuneCountInString(vp); n > budget {
		c := modeltext.Tail([]byte(vp), budget, false)
		r.Viewport = string(c.Text)
		r.ViewportOmittedLines = int(c.OmittedLines)
		r.ViewportOmittedChars = utf8.RuneCountInString(vp[:c.OmittedBytes])
		cut := r.ViewportOmittedLines
		if c.OmittedBytes > 0 && vp[c.OmittedBytes-1] != '\n' {
			cut++ // the first row shown is only its end
		}
		shown = rows[min(cut, len(rows)):]
		budget = 0
	} else {
		r.Viewport = vp
		budget -= n
	}
	r.Unread = s.unread.take(budget)
	// The main screen is not on view while the alternate one is: what the
	// model saw of it is still what an earlier Read showed.
	if !r.AltScreen {
		s.seen, s.tries = shown, len(rows)
	}
	return r
}

// queue holds the unread lines, oldest first, with the counts of those
// dropped for room.
type queue struct {
	lines                      []string
	chars                      int // code points of lines, a newline each included
	droppedLines, droppedChars int
}

func (q *queue) push(t string) {
	if len(q.lines) >= MaxUnreadLines {
		n := utf8.RuneCountInString(q.lines[0]) + 1
		q.droppedLines++
		q.droppedChars += n
		q.chars -= n
		q.lines[0] = ""
		q.lines = q.lines[1:]
	}
	q.lines = append(q.lines, t)
	q.chars += utf8.RuneCountInString(t) + 1
}

// take empties the queue, returning its newest lines within budget code
// points. When not even the newest line fits, its end does.
func (q *queue) take(budget int) Unread {
	u := Unread{OmittedLines: q.droppedLines, OmittedChars: q.droppedChars}
	used, i := 0, len(q.lines)
	for i > 0 {
		n := utf8.RuneCountInString(q.lines[i-1]) + 1
		if used+n > budget {
			break
		}
		used += n
		i--
	}
	if i == len(q.lines) && i > 0 && budget > 0 {
		// Not even the newest line fits: the end of it.
		last := q.lines[i-1] + "\n"
		c := modeltext.Tail([]byte(last), budget, false)
		u.Text, u.Lines = string(c.Text), 1
		u.OmittedChars += utf8.RuneCountInString(last[:c.OmittedBytes])
		i--
		u.addOmitted(q.lines[:i])
		*q = queue{}
		return u
	}
	u.addOmitted(q.lines[:i])
	var b strings.Builder
	b.Grow(used)
	for _, t := range q.lines[i:] {
		b.WriteString(t)
		b.WriteByte('\n')
		u.Lines++
	}
	u.Text = b.String()
	*q = queue{}
	return u
}

func (u *Unread) addOmitted(lines []string) {
	for _, t := range lines {
		u.OmittedLines++
		u.OmittedChars += utf8.RuneCountInString(t) + 1
	}
}
