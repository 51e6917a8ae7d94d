package screen

import (
	"strings"
	"testing"
)

// A repaint fed to a fresh screen of the same size shows the same screen,
// colours and cursor included, and the source's unread lines stay unread.
func TestRepaintReproducesTheScreen(t *testing.T) {
	src := New(40, 6, nil)
	defer src.Close()
	src.Write([]byte("\x1b[31mred\x1b[0m plain\r\nwide 漢字 ok\r\n"))
	for i := range 8 {
		src.Write([]byte(strings.Repeat("x", i) + "\r\n"))
	}
	src.Write([]byte("$ \x1b[1mbold\x1b[2;5H"))
	dst := New(40, 6, nil)
	defer dst.Close()
	// dst shows something else first: the repaint clears it.
	dst.Write([]byte("old junk\r\nmore junk"))
	rp := src.Repaint()
	dst.Write(rp)
	if got, want := dst.Viewport(), src.Viewport(); got != want {
		t.Fatalf("repainted:\n%s\nsource:\n%s", got, want)
	}
	sr, sc, sh := src.Cursor()
	dr, dc, dh := dst.Cursor()
	if sr != dr || sc != dc || sh != dh {
		t.Fatalf("cursor %d,%d hidden %v; source %d,%d hidden %v", dr, dc, dh, sr, sc, sh)
	}
	if !strings.Contains(string(rp), "\x1b[1m") {
		t.Fatalf("the bold text lost its style: %q", rp)
	}
	// What the source's model had not read is still unread.
	if r := src.Read(10000); !strings.Contains(r.Unread.Text, "red plain") {
		t.Fatalf("unread after a repaint: %+v", r)
	}

	// A full-screen program's screen is painted on the alternate screen.
	src.Write([]byte("\x1b[?1049h\x1b[Hfull screen\x1b[?25l"))
	alt := New(40, 6, nil)
	defer alt.Close()
	alt.Write(src.Repaint())
	if !alt.AltScreen() || alt.Viewport() != "full screen" {
		t.Fatalf("alternate screen: alt %v, %q", alt.AltScreen(), alt.Viewport())
	}
	if _, _, hidden := alt.Cursor(); !hidden {
		t.Fatal("the hidden cursor shows")
	}
}
