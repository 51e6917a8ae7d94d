package screen

import (
	"bytes"
	"fmt"

	uv "github.com/charmbracelet/ultraviolet"
)

// Repaint is the screen as bytes a terminal (xterm.js) paints as it
// stands: a full reset, the alternate screen entered if a full-screen
// program has it, every row with its colours and attributes, then the
// cursor where it is (hidden if the program hid it). A terminal that
// paints it, then what the program prints from then on, shows what this
// one does. It consumes nothing: the unread lines stay unread.
func (s *Screen) Repaint() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b bytes.Buffer
	s.look(func() {
		b.Reset()
		s.flush()
		b.WriteString("\x1bc") // RIS: a clean terminal, whatever it showed
		if s.emu.IsAltScreen() {
			b.WriteString("\x1b[?1049h")
		}
		b.WriteString("\x1b[H\x1b[2J")
		h, w := s.emu.Height(), s.emu.Width()
		line := make(uv.Line, w)
		for y := range h {
			for x := range w {
				if c := s.emu.CellAt(x, y); c != nil {
					line[x] = *c
				} else {
					line[x] = uv.Cell{}
				}
			}
			fmt.Fprintf(&b, "\x1b[%d;1H", y+1)
			b.WriteString(line.Render())
			b.WriteString("\x1b[0m")
		}
		p := s.emu.CursorPosition()
		fmt.Fprintf(&b, "\x1b[%d;%dH", p.Y+1, p.X+1)
		if s.emu.CursorHidden() {
			b.WriteString("\x1b[?25l")
		}
	})
	return b.Bytes()
}
