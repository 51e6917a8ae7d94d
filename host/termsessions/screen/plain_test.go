package screen

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pieces are what the differential test builds output from: plain lines
// of every width around the screen's, and what a plain run must stop at
// or be verified against (wrapping, an overwrite after CR, a bare LF,
// colours, tabs, wide characters, clears, resets, other G sets, scroll
// regions, margins, the alternate screen).
func piece(r *rand.Rand, cols int) string {
	switch r.IntN(22) {
	case 0:
		return "\x1b[31mred\x1b[0m\r\n"
	case 1:
		return "\x1b(0lqqk\x1b(B\r\n"
	case 2:
		return "\x1b(0"
	case 3:
		return "\x1b(B"
	case 4:
		return "\x1b[2;4r"
	case 5:
		return "\x1b[r"
	case 6:
		return "\x1b[2J\x1b[H"
	case 7:
		return "\x1bc"
	case 8:
		return "\x1b[?1049h"
	case 9:
		return "\x1b[?1049l"
	case 10:
		return "a\tb\r\n"
	case 11:
		return "wide 日本\r\n"
	case 12:
		return "bare LF\n"
	case 13:
		return "over\rOV"
	case 14:
		// Within the screen's width (the emulator indexes out of its
		// rows with a right margin past it).
		return fmt.Sprintf("\x1b[?69h\x1b[1;%ds", cols)
	case 15:
		return "\x1b[?69l\x1b[s"
	case 16:
		return "   \r\n"
	}
	// A run of plain lines, long enough to be taken over.
	var b strings.Builder
	for range r.IntN(60) {
		w := r.IntN(cols + 3)
		if r.IntN(8) == 0 {
			w = cols
		}
		for j := range w {
			if r.IntN(9) == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteByte(byte('a' + j%26))
			}
		}
		if r.IntN(30) == 0 {
			b.WriteString("\r") // CR CR LF
		}
		b.WriteString("\r\n")
	}
	return b.String()
}

// TestPlainLinesReadAsTheEmulatorWould feeds the same output, cut at
// random places, to a Screen that takes plain lines over and to one that
// feeds every byte to the emulator, and compares every look at them.
func TestPlainLinesReadAsTheEmulatorWould(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SCREEN_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	took := 0
	for round := range 300 {
		cols, rows := 1+r.IntN(12), 1+r.IntN(6)
		fast, slow := New(cols, rows, nil), New(cols, rows, nil)
		slow.noPlain = true
		var out strings.Builder
		for range 1 + r.IntN(12) {
			out.WriteString(piece(r, cols))
		}
		b := []byte(out.String())
		var ops []string
		defer func() {
			if e := recover(); e != nil {
				t.Fatalf("panic %v after %q", e, ops)
			}
		}()
		for step := 0; len(b) > 0; step++ {
			n := min(len(b), 1+r.IntN(200))
			ops = append(ops, fmt.Sprintf("W%dx%d:%q", cols, rows, b[:n]))
			feed(t, fast, string(b[:n]))
			feed(t, slow, string(b[:n]))
			b = b[n:]
			if fast.plain.on {
				took++
			}
			what := fmt.Sprintf("round %d (%dx%d) step %d, output %q", round, cols, rows, step, out.String())
			switch r.IntN(6) {
			case 0:
				budget := r.IntN(200)
				if f, s := fast.Read(budget), slow.Read(budget); f != s {
					t.Fatalf("%s: Read(%d)\n fast %+v\n slow %+v", what, budget, f, s)
				}
			case 1:
				if f, s := fast.Unread(50), slow.Unread(50); f != s {
					t.Fatalf("%s: Unread\n fast %+v\n slow %+v", what, f, s)
				}
			case 2:
				fr, fc, _ := fast.Cursor()
				sr, sc, _ := slow.Cursor()
				if fr != sr || fc != sc {
					t.Fatalf("%s: cursor fast %d,%d slow %d,%d", what, fr, fc, sr, sc)
				}
			case 3:
				c, h := cols+r.IntN(3), 1+r.IntN(6) // never narrower: see piece
				ops = append(ops, fmt.Sprintf("R%dx%d", c, h))
				fast.Resize(c, h)
				slow.Resize(c, h)
			}
		}
		if f, s := fast.Read(1<<20), slow.Read(1<<20); f != s {
			t.Fatalf("round %d: last Read\n fast %+v\n slow %+v\n output %q", round, f, s, out.String())
		}
		_ = fast.Close()
		_ = slow.Close()
	}
	t.Logf("%d writes left the hold on", took)
	if took == 0 {
		t.Fatal("no plain run was ever taken over: the test compares nothing")
	}
}

// TestPlainLinesUnderAScrollRegion: within top and bottom margins that
// are not the whole screen a line feed scrolls only the region, keeping
// the rows above it, and the emulator pushes the region's top row, not
// the screen's, so plain lines there are the emulator's to print. Here
// the row above the region and the region's first two lines are all
// "a": row for row and in its scrollback the screen looks as if the
// whole of it had scrolled, and the check of the emulator alone passes
// (a randomized run, seed 1796307127875712331, took over on such a
// screen). Once the margins are the whole screen again, plain lines are
// taken over again.
func TestPlainLinesUnderAScrollRegion(t *testing.T) {
	out := "\x1b[2ra\r\na\r\na\r\n" + numbered(1, 7)
	fast, slow := newScreen(t, 2, 3, nil), newScreen(t, 2, 3, nil)
	slow.noPlain = true
	feed(t, fast, out)
	feed(t, slow, out)
	if f, s := fast.Read(1<<20), slow.Read(1<<20); f != s {
		t.Fatalf("after %q:\n fast %+v\n slow %+v", out, f, s)
	}
	if rd := slow.Read(1 << 20); rd.Viewport != "a\n7" {
		t.Fatalf("viewport %q, want the row above the region kept", rd.Viewport)
	}

	// The margins put back move the cursor home: the lines fill the
	// screen before the next write's can be taken over.
	out = "\x1b[r" + numbered(1, 20)
	feed(t, fast, out)
	feed(t, slow, out)
	out = numbered(21, 40)
	feed(t, fast, out)
	feed(t, slow, out)
	if !fast.plain.on {
		t.Error("plain lines after the margins were reset were not taken over")
	}
	if f, s := fast.Read(1<<20), slow.Read(1<<20); f != s {
		t.Fatalf("after %q:\n fast %+v\n slow %+v", out, f, s)
	}

	// A resize puts the margins back to the whole screen too.
	feed(t, fast, "\x1b[2r")
	feed(t, slow, "\x1b[2r")
	fast.Resize(2, 4)
	slow.Resize(2, 4)
	feed(t, fast, numbered(41, 60))
	feed(t, slow, numbered(41, 60))
	feed(t, fast, numbered(61, 80))
	feed(t, slow, numbered(61, 80))
	if !fast.plain.on {
		t.Error("plain lines after a resize were not taken over")
	}
	if f, s := fast.Read(1<<20), slow.Read(1<<20); f != s {
		t.Fatalf("after a resize:\n fast %+v\n slow %+v", f, s)
	}
}

// TestPlainLinesAreFast: 300,000 lines on a 200×50 screen (what the
// persistent bash tool's shell has) take well under a second.
func TestPlainLinesAreFast(t *testing.T) {
	var out []byte
	for i := 1; i <= 300000; i++ {
		out = strconv.AppendInt(out, int64(i), 10)
		out = append(out, '\r', '\n')
	}
	s := newScreen(t, 200, 50, nil)
	start := time.Now()
	for off := 0; off < len(out); off += 32 << 10 {
		feed(t, s, string(out[off:min(off+32<<10, len(out))]))
	}
	took := time.Since(start)
	rd := s.Read(1 << 20)
	if !strings.HasSuffix(rd.Viewport, "\n300000") || !strings.HasPrefix(rd.Viewport, "299952\n") {
		t.Errorf("viewport = %q…%q", rd.Viewport[:20], rd.Viewport[len(rd.Viewport)-20:])
	}
	if rd.Unread.Lines+rd.Unread.OmittedLines != 300000-49 {
		t.Errorf("unread %d + omitted %d lines, want %d", rd.Unread.Lines, rd.Unread.OmittedLines, 300000-49)
	}
	// Fed line by line to the emulator this took some 20 s; a loaded
	// machine gets a wide margin.
	if took > 5*time.Second {
		t.Errorf("300,000 lines took %s", took)
	}
	t.Logf("300,000 lines in %s", took)
}
