// Package modeltext turns what a process printed into what a model reads:
// text without terminal control sequences, each carriage-return-overwritten
// line in its last state, binary output recognised, and a tail that fits a
// budget of characters, cut at a line boundary and never inside a code
// point, with exact counts of what was left out.
//
// It is pure (no I/O, no goroutines, no global state). Tools that show
// command output to a model (the bash tool, terminals, hooks) share it, so
// every one of them cleans and cuts the same way. The raw bytes stay where
// they were (spill files); the words around a cut (where the full output
// is) are the tool's.
package modeltext

import (
	"bytes"
	"unicode/utf8"
)

// Removed counts what Clean took out.
type Removed struct {
	// Sequences are escape sequences: CSI (colours, cursor moves, erases),
	// OSC (titles, hyperlinks, OSC 52 clipboard writes), DCS, SOS, PM,
	// APC and the short ESC ones.
	Sequences int
	// Controls are other control characters (C0 but newline and tab, DEL,
	// C1), and backspaces.
	Controls int
	// Overwrites are carriage returns that went back over a line (a CRLF
	// is a newline and is not counted).
	Overwrites int
	// Invalid are bytes that were not UTF-8, each shown as U+FFFD.
	Invalid int
}

// Any reports whether Clean changed anything.
func (r Removed) Any() bool {
	return r.Sequences > 0 || r.Controls > 0 || r.Overwrites > 0 || r.Invalid > 0
}

// Add sums two counts.
func (r Removed) Add(o Removed) Removed {
	return Removed{r.Sequences + o.Sequences, r.Controls + o.Controls, r.Overwrites + o.Overwrites, r.Invalid + o.Invalid}
}

// Clean returns b as a terminal would leave each line, in valid UTF-8:
// escape sequences removed (an erase in line, CSI K, is applied), a line
// overwritten after a carriage return shows what the terminal would show
// (progress 10% … 100%: only the last), backspaces move back over the line,
// other control characters go; newline and tab stay. A string sequence
// (OSC, DCS, …) that is never terminated ends at the next newline. When
// nothing needs cleaning, b itself is returned.
func Clean(b []byte) ([]byte, Removed) {
	if plain(b) {
		return b, Removed{}
	}
	c := cleaner{out: make([]byte, 0, len(b))}
	c.run(b)
	return c.out, c.removed
}

// plain reports whether b is valid UTF-8 without anything Clean changes.
func plain(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\n' || c == '\t':
		case c < 0x20 || c == 0x7f:
			return false
		case c >= 0x80:
			// C1 controls are U+0080..U+009F: 0xC2 0x80..0x9F.
			if c == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f {
				return false
			}
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n - 1
		}
	}
	return true
}

// cleaner holds the line being drawn: its cells and the cursor.
type cleaner struct {
	out     []byte
	line    []rune
	cursor  int
	removed Removed
}

const (
	esc = 0x1b
	bel = 0x07
)

func (c *cleaner) run(b []byte) {
	for i := 0; i < len(b); {
		ch := b[i]
		switch {
		case ch == '\n':
			c.flush()
			c.out = append(c.out, '\n')
			i++
		case ch == '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				i++ // CRLF: the newline ends the line
				continue
			}
			// Going back over a line only counts once there is more to
			// write over it: a trailing CR changes nothing.
			if j := i + 1; j < len(b) && b[j] != '\r' && len(c.line) > 0 {
				c.removed.Overwrites++
			}
			c.cursor = 0
			i++
		case ch == '\b':
			if c.cursor > 0 {
				c.cursor--
			}
			c.removed.Controls++
			i++
		case ch == '\t':
			c.put('\t')
			i++
		case ch == esc:
			i += c.escape(b[i:])
		case ch < 0x20 || ch == 0x7f:
			c.removed.Controls++
			i++
		case ch < 0x80:
			c.put(rune(ch))
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				c.removed.Invalid++
				c.put(utf8.RuneError)
			case r == 0x9b: // CSI in its 8-bit form
				c.removed.Sequences++
				n += csiLen(b[i+n:])
			case r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f: // OSC, DCS, SOS, PM, APC
				c.removed.Sequences++
				n += stringLen(b[i+n:])
			case r >= 0x80 && r <= 0x9f:
				c.removed.Controls++
			default:
				c.put(r)
			}
			i += n
		}
	}
	c.flush()
}

// put writes r at the cursor, over what was there.
func (c *cleaner) put(r rune) {
	if c.cursor < len(c.line) {
		c.line[c.cursor] = r
	} else {
		c.line = append(c.line, r)
	}
	c.cursor++
}

// flush ends the line being drawn.
func (c *cleaner) flush() {
	for _, r := range c.line {
		c.out = utf8.AppendRune(c.out, r)
	}
	c.line, c.cursor = c.line[:0], 0
}

// escape consumes the escape sequence at the start of b (b[0] is ESC) and
// returns its length.
func (c *cleaner) escape(b []byte) int {
	c.removed.Sequences++
	if len(b) < 2 {
		return len(b)
	}
	switch b[1] {
	case '[':
		n := 2 + csiLen(b[2:])
		c.csi(b[2:n])
		return n
	case ']', 'P', 'X', '^', '_':
		return 2 + stringLen(b[2:])
	}
	// ESC, intermediates (0x20..0x2F), one final byte (0x30..0x7E).
	n := 1
	for n < len(b) && b[n] >= 0x20 && b[n] <= 0x2f {
		n++
	}
	if n < len(b) && b[n] >= 0x30 && b[n] <= 0x7e {
		n++
	}
	return n
}

// csi applies what a CSI sequence (its bytes after "ESC [") does to the
// line: an erase in line (K) clears cells, a cursor move back (D) or to a
// column (G) moves it; everything else only goes.
func (c *cleaner) csi(seq []byte) {
	if len(seq) == 0 {
		return
	}
	param := 0
	for _, d := range seq[:len(seq)-1] {
		if d >= '0' && d <= '9' {
			param = min(param*10+int(d-'0'), 1<<16)
		} else {
			param = -1 // private or several parameters: not a plain move
			break
		}
	}
	switch seq[len(seq)-1] {
	case 'K':
		switch param {
		case 0:
			c.line = c.line[:min(c.cursor, len(c.line))]
		case 1:
			for i := 0; i < c.cursor && i < len(c.line); i++ {
				c.line[i] = ' '
			}
		case 2:
			c.line = c.line[:0]
		}
	case 'D':
		if param >= 0 {
			c.cursor = max(0, c.cursor-max(param, 1))
		}
	case 'G':
		if param >= 0 {
			c.cursor = max(param, 1) - 1
			for len(c.line) < c.cursor {
				c.line = append(c.line, ' ')
			}
		}
	}
}

// csiLen is the length of a CSI sequence's parameters, intermediates and
// final byte at the start of b (after its introducer). An unfinished one
// runs to the first byte that cannot belong to it.
func csiLen(b []byte) int {
	n := 0
	for n < len(b) && b[n] >= 0x30 && b[n] <= 0x3f {
		n++
	}
	for n < len(b) && b[n] >= 0x20 && b[n] <= 0x2f {
		n++
	}
	if n < len(b) && b[n] >= 0x40 && b[n] <= 0x7e {
		n++
	}
	return n
}

// stringLen is the length of a string sequence's body and terminator at
// the start of b: up to BEL or ST (ESC \ or U+009C). One never terminated
// ends before the next newline.
func stringLen(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case bel:
			return i + 1
		case esc:
			if i+1 < len(b) && b[i+1] == '\\' {
				return i + 2
			}
		case 0xc2:
			if i+1 < len(b) && b[i+1] == 0x9c {
				return i + 2
			}
		case '\n':
			return i
		}
	}
	return len(b)
}

// IsBinary reports whether b is better not shown as text: it holds a NUL
// byte, or at least 16 bytes of which more than a quarter are not UTF-8
// (one stray byte in a line of text is shown, as U+FFFD).
func IsBinary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	if len(b) < 16 {
		return false
	}
	invalid := 0
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			invalid++
		}
		i += n
	}
	return invalid*4 > len(b)
}
