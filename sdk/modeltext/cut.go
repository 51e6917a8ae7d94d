package modeltext

import (
	"bytes"
	"unicode/utf8"
)

// Cut is what Tail kept of a text and what it left out of it.
type Cut struct {
	Text []byte
	// OmittedBytes and OmittedLines count what was left out before Text:
	// its bytes, and the newlines among them (a line cut in two counts
	// with the part that holds its newline).
	OmittedBytes, OmittedLines int64
}

// Tail keeps the end of s within budget code points. What it keeps starts at
// a line boundary, unless even the last line is longer than the budget: then it
// starts inside that line, at a code point boundary. With partial, s is
// known to begin inside a line (what came before was dropped already), so
// that first piece of a line is left out too when a whole line follows.
func Tail(s []byte, budget int, partial bool) Cut {
	lo := len(s) // the earliest start within the budget
	for n := 0; lo > 0 && n < budget; n++ {
		_, size := utf8.DecodeLastRune(s[:lo])
		lo -= size
	}
	start := lo
	if lo > 0 || partial {
		start = lineStart(s, lo)
	}
	return Cut{Text: s[start:], OmittedBytes: int64(start), OmittedLines: int64(bytes.Count(s[:start], newline))}
}

var newline = []byte{'\n'}

// lineStart is the first line boundary at or after lo that leaves a line
// to show, or lo itself when the last line starts before lo.
func lineStart(s []byte, lo int) int {
	if lo > 0 && s[lo-1] == '\n' {
		return lo
	}
	i := bytes.IndexByte(s[lo:], '\n')
	if i < 0 || lo+i+1 == len(s) {
		return lo // inside the last line
	}
	return lo + i + 1
}

// Share splits a budget of code points between two texts of a and b code
// points: each gets the smaller of its length and half the budget, and what
// one leaves unused goes to the other.
func Share(budget, a, b int) (int, int) {
	budget = max(budget, 0)
	sb := min(b, budget-budget/2)
	sa := min(a, budget-sb) // a takes what b left of its half
	sb = min(b, budget-sa)  // and b what a left of its own
	return sa, sb
}
