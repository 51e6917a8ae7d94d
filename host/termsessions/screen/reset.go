package screen

import (
	"runtime/debug"
	"strings"
)

// Failure is one panic of the emulator's, which reset the screen.
type Failure struct {
	// Op is what was under way: "write" (output of the program's being
	// fed), "resize", or "read" (the screen being looked at, which feeds
	// the emulator the plain lines it was held back from).
	Op string
	// Panic is the panic's value; Stack the stack where it was raised.
	Panic any
	Stack []byte
}

// The notes a reset leaves among the unread lines, for the model.
const (
	noteOutput = "[terminal: the screen could not be drawn after a sequence the program printed; it was reset]"
	noteResize = "[terminal: the screen could not be drawn after a resize; it was reset]"
)

// OnReset has f told of every reset, after it. f runs with the Screen
// locked, on the goroutine that called it (the PTY's reader, for a
// write): it must not call the Screen, nor wait long. Set it before the
// Screen is fed.
func (s *Screen) OnReset(f func(Failure)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onReset = f
}

// try runs f, a call into the emulator, under s.mu, and reports whether it
// returned: a panic in it resets the screen and is not raised further.
func (s *Screen) try(op string, f func()) (ok bool) {
	defer func() {
		if ok {
			return
		}
		// Nil is runtime.Goexit (a test's FailNow), which must go on.
		if r := recover(); r != nil {
			s.reset(Failure{Op: op, Panic: r, Stack: debug.Stack()})
		}
	}()
	f()
	return true
}

// look runs f, which looks at the screen, under try; after a reset it runs
// f once more, on the fresh screen, so the caller still gets an answer.
func (s *Screen) look(f func()) {
	if !s.try("read", f) {
		s.try("read", f)
	}
}

// reset replaces the emulator that failed by a fresh one of the size
// last asked for. What the screen showed becomes unread lines, as a
// clear's rows do (the model has not read them, unless its last Read
// showed them), then a note saying the screen was reset; what the program
// prints next starts on a blank screen.
func (s *Screen) reset(f Failure) {
	// The emulator that failed may fail again when looked at: what it
	// gives before that is kept.
	func() {
		defer func() { _ = recover() }()
		if s.plain.on {
			s.pushRows(s.plain.heldRows())
			return
		}
		s.drain()
		if !s.emu.IsAltScreen() {
			s.pushRows(s.rows())
		}
	}()
	note := noteOutput
	if f.Op == "resize" {
		note = noteResize
	}
	s.unread.push(note)
	s.seen, s.tries = nil, 0
	s.plain = plainState{}
	s.stopReplies()
	s.start(s.w, s.h)
	if s.onReset != nil {
		s.onReset(f)
	}
}

// heldRows is the held screen's rows while the hold is on (plain.go),
// top first, as text.
func (ps *plainState) heldRows() []string {
	rows := append([]string(nil), ps.old...)
	for _, l := range ps.pend {
		rows = append(rows, strings.TrimRight(string(l), " "))
	}
	return append(rows, strings.TrimRight(string(ps.part), " "))
}
