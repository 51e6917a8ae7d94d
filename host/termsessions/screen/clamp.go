package screen

import (
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// Parameters the emulator takes as given, cut to what the screen holds
// before its own handler reads them. Each clamp's handler runs first and
// returns false, so the emulator's runs next, on the same array.

// hasMore is the flag a parameter followed by a sub-parameter carries.
const hasMore = ansi.Param(parser.HasMoreFlag)

// clampMargins holds the margins a program sets within the screen. The
// emulator takes a bottom margin below the last row (DECSTBM) or a right
// one past the last column (DECSLRM, with DECLRMM on) as given, and then
// indexes past the screen's rows and cells wherever it moves cells inside
// them (ultraviolet's Buffer.InsertLineArea, DeleteLineArea and
// InsertCellArea, reached from scrolling, IL, DL, ICH, SU, SD, RI). A
// program sets margins for the size it last knew, larger than the screen
// after a resize to smaller; xterm takes such a margin as the screen's
// edge, and so does this. The emulator's Resize puts the margins back to
// the whole screen, so a resize needs nothing.
func (s *Screen) clampMargins() {
	emu := s.emu
	// The second parameter is the bottom or right margin.
	emu.RegisterCsiHandler('r', func(params ansi.Params) bool {
		clampParam(params, 1, emu.Height())
		return false
	})
	emu.RegisterCsiHandler('s', func(params ansi.Params) bool {
		clampParam(params, 1, emu.Width())
		return false
	})
}

// clampCounts cuts counts the emulator loops over one by one, which a
// program may set to two thousand million (hours of work, the Screen
// locked throughout): CHT and CBT (tab forward and back) and ECH (erase
// characters) to the screen's width, which is as far as they can go; REP
// (repeat the last character) to a screenful and a line, ending on the
// same column. A longer repeat only pushes more copies of one line off the
// top: those are not made.
func (s *Screen) clampCounts() {
	emu := s.emu
	for _, final := range "IZX" {
		emu.RegisterCsiHandler(int(final), func(params ansi.Params) bool {
			clampParam(params, 0, emu.Width())
			return false
		})
	}
	emu.RegisterCsiHandler('b', func(params ansi.Params) bool {
		w := emu.Width()
		if n, _, _ := params.Param(0, 1); n > w*(emu.Height()+1) {
			clampParam(params, 0, w*emu.Height()+n%w)
		}
		return false
	})
}

// clampParam cuts the i-th parameter, when there, to at most n.
func clampParam(params ansi.Params, i, n int) {
	if i < len(params) && params[i].Param(0) > n {
		params[i] = params[i]&hasMore | ansi.Param(n)
	}
}
