package screen

import (
	"bytes"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Plain lines: output that is nothing but lines of printable ASCII, each
// ended by CR LF and no wider than the screen, the usual shape of a
// command's bulk output (a log, a listing, seq). Fed to the emulator, each
// such line scrolls the screen, which copies every cell (some 60 µs at
// 200×50: 300,000 lines took 20 s, and the terminal's output waited on
// it). Once the emulator is seen to print such lines as they are and push
// them into its scrollback (verify), the Screen takes over: a line that
// scrolls off goes to unread as the emulator would have pushed it, and
// the emulator is given only the lines still on the screen, when the
// screen is next looked at or other output comes (flush). What a read
// shows is the same either way.

// plainState is the Screen's hold on plain lines. While on, the
// emulator's screen is behind: its rows above the bottom one were, top
// first, the lines old was taken from; the lines since (pend, then part
// on the bottom row) have not been fed to it, and its cursor is at the
// start of the bottom row, which is blank. old and pend together are
// always as many as the rows above the bottom one.
type plainState struct {
	on   bool
	old  []string // rows not yet scrolled off, as text
	pend [][]byte // complete lines after them, as printed (no CR LF)
	part []byte   // the bottom row's line so far
	cr   bool     // part was followed by a CR: the cursor is at its start

	// Tracked from the output, so that no line is taken over where the
	// emulator would print it otherwise: a G set designated to anything
	// but ASCII, left and right margins (DECLRMM) enabled since the last
	// full reset, and top and bottom margins (DECSTBM) on the main screen
	// other than its first and last rows. Within such a scroll region a
	// line feed scrolls only the region's rows, and the emulator pushes
	// the row at the region's top into its scrollback, not the screen's.
	charset [4]bool
	margins bool
	region  bool
}

// minPlainRun is how many rows' worth of plain lines must come in a row
// before the Screen verifies and takes over: below that, the emulator
// scrolls them at no great cost.
const minPlainRun = 3

// watchPlain registers the handlers that track what plainState must
// know; each lets the emulator's own handler run next.
func (s *Screen) watchPlain() {
	for set, inter := range "()*+" {
		for _, final := range "AB0" {
			s.emu.RegisterEscHandler(ansi.Command(0, byte(inter), byte(final)), func() bool {
				s.plain.charset[set] = final != 'B'
				return false
			})
		}
	}
	s.emu.RegisterCsiHandler(ansi.Command('?', 0, 'h'), func(params ansi.Params) bool {
		for _, p := range params {
			if p.Param(-1) == 69 {
				s.plain.margins = true
			}
		}
		return false
	})
	// Run before clampMargins' handler (the last registered runs first),
	// so the bottom margin is cut to the screen here as it is there; the
	// rest is the emulator's own reading of DECSTBM, which sets the
	// margins of the screen on view only and ignores a top not above the
	// bottom. Resize and a full reset put them back to the whole screen.
	s.emu.RegisterCsiHandler('r', func(params ansi.Params) bool {
		if s.emu.IsAltScreen() {
			return false
		}
		h := s.emu.Height()
		top, _, _ := params.Param(0, 1)
		top = max(top, 1)
		bottom, _, _ := params.Param(1, h)
		if bottom < 1 || bottom > h {
			bottom = h
		}
		if top < bottom {
			s.plain.region = top != 1 || bottom != h
		}
		return false
	})
}

func printable(c byte) bool { return c >= 0x20 && c <= 0x7e }

// plainRun counts the complete plain lines at the start of p, the first
// starting at column col, and the bytes they take.
func plainRun(p []byte, col, cols int) (lines, n int) {
	i := 0
	for {
		j := i
		for j < len(p) && printable(p[j]) {
			j++
		}
		if col+j-i > cols || j+1 >= len(p) || p[j] != '\r' || p[j+1] != '\n' {
			return lines, i
		}
		lines++
		i, col = j+2, 0
	}
}

// writeEmu feeds p to the emulator up to the start of a run of plain lines
// long enough to take over, verifies the emulator on its first screenful
// and, when it passes, turns the Screen's hold on. It returns how much of
// p it took.
func (s *Screen) writeEmu(p []byte) (int, error) {
	cols, rows := s.emu.Width(), s.emu.Height()
	i := 0
	for i < len(p) {
		if i > 0 || s.emu.CursorPosition().X == 0 {
			lines, n := plainRun(p[i:], 0, cols)
			if !s.noPlain && lines >= minPlainRun*rows {
				if err := s.feed(p[:i]); err != nil {
					return 0, err
				}
				first := lineEnds(p[i:i+n], rows)
				ok, err := s.verify(p[i : i+first])
				if err != nil || ok {
					return i + first, err
				}
				return i + n, s.feed(p[i+first : i+n])
			}
			i += n
		}
		// Past the line that is not plain.
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return len(p), s.feed(p)
}

// lineEnds is where the first k lines (each ended by LF) of p end.
func lineEnds(p []byte, k int) int {
	i := 0
	for range k {
		i += bytes.IndexByte(p[i:], '\n') + 1
	}
	return i
}

// feed writes p to the emulator in pieces that cannot fill its
// scrollback, moving its lines out after each.
func (s *Screen) feed(p []byte) error {
	// Every byte pushes at most a screenful into the emulator's scrollback
	// (a newline one line, an erase of the display the whole screen):
	// feeding pieces this small and moving the lines out after each keeps
	// that scrollback from filling.
	chunk := max(1, emuScrollback/(s.emu.Height()+1))
	for off := 0; off < len(p); off += chunk {
		if _, err := s.emu.Write(p[off:min(off+chunk, len(p))]); err != nil {
			return err
		}
		s.drain()
	}
	return nil
}

// verify feeds the emulator b, a screenful of plain lines, and turns the
// hold on when it printed them as they are: each on a row of its own,
// the first pushed into its scrollback, the cursor at the start of a
// blank bottom row, on the main screen, with ASCII in every G set, no
// left and right margins and no scroll region.
func (s *Screen) verify(b []byte) (bool, error) {
	if _, err := s.emu.Write(b); err != nil {
		return false, err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\r\n"), "\r\n")
	h := s.emu.Height()
	sb := s.emu.Scrollback()
	ok := len(lines) == h && !s.emu.IsAltScreen() && s.plain.charset == [4]bool{} && !s.plain.margins && !s.plain.region &&
		s.emu.CursorPosition().X == 0 && s.emu.CursorPosition().Y == h-1 &&
		sb.Len() > 0 && lineText(sb.Line(sb.Len()-1)) == strings.TrimRight(lines[0], " ")
	if ok {
		rows := s.rows()
		ok = rows[h-1] == ""
		for y := 0; ok && y < h-1; y++ {
			ok = rows[y] == strings.TrimRight(lines[y+1], " ")
		}
	}
	s.drain()
	if ok {
		s.plain.on = true
		s.plain.old = s.plain.old[:0]
		for _, l := range lines[1:] {
			s.plain.old = append(s.plain.old, strings.TrimRight(l, " "))
		}
	}
	return ok, nil
}

// takePlain takes what it can of p while the hold is on: plain lines,
// and the start of one. It returns how much it took; the rest is for the
// emulator, after a flush.
func (s *Screen) takePlain(p []byte) int {
	ps := &s.plain
	cols := s.emu.Width()
	var done [][]byte // lines completed here
	start := 0        // where the line being printed starts in p
	i := 0
	stop := false
	for i < len(p) && !stop {
		switch c := p[i]; {
		case printable(c):
			j := i
			for j < len(p) && printable(p[j]) {
				j++
			}
			if ps.cr || len(ps.part)+j-start > cols {
				// Written over, or wrapped: the emulator's to print.
				stop = true
				break
			}
			i = j
		case c == '\r':
			ps.cr = true
			i++
		case c == '\n' && ps.cr:
			line := trimCR(p[start:i])
			if len(ps.part) > 0 {
				line = append(ps.part, line...)
				ps.part = nil
			}
			done = append(done, line)
			ps.cr = false
			i++
			start = i
		default:
			stop = true
		}
	}
	// The line under way, whatever stopped: its CRs are in ps.cr.
	ps.part = append(ps.part, trimCR(p[start:i])...)
	s.scrollPlain(done)
	return i
}

// trimCR is a line's bytes without the CRs after them.
func trimCR(b []byte) []byte { return bytes.TrimRight(b, "\r") }

// scrollPlain scrolls the held screen by lines: as many rows as come in
// leave at the top, the emulator's first, each as the emulator would
// have pushed it.
func (s *Screen) scrollPlain(lines [][]byte) {
	ps := &s.plain
	for range len(lines) {
		switch {
		case len(ps.old) > 0:
			s.pushed(ps.old[0])
			ps.old[0] = ""
			ps.old = ps.old[1:]
			ps.pend = append(ps.pend, bytes.Clone(lines[0]))
		case len(ps.pend) > 0:
			s.pushed(strings.TrimRight(string(ps.pend[0]), " "))
			ps.pend[0] = nil
			ps.pend = append(ps.pend[1:], bytes.Clone(lines[0]))
		default: // a screen of one row: the line itself leaves
			s.pushed(strings.TrimRight(string(lines[0]), " "))
		}
		lines = lines[1:]
	}
}

// pushed takes a line that left the main screen at the top.
func (s *Screen) pushed(t string) {
	if !s.wasSeen(t) {
		s.unread.push(t)
	}
}

// flush turns the hold off: the emulator is given the lines still on the
// held screen, and what they push out of its screen (rows that went to
// unread already) is dropped from its scrollback.
func (s *Screen) flush() {
	ps := &s.plain
	if !ps.on {
		return
	}
	var b []byte
	for _, l := range ps.pend {
		b = append(append(b, l...), '\r', '\n')
	}
	b = append(b, ps.part...)
	if ps.cr {
		b = append(b, '\r')
	}
	_, _ = s.emu.Write(b)
	s.emu.Scrollback().Clear()
	*ps = plainState{charset: ps.charset, margins: ps.margins, region: ps.region}
}
