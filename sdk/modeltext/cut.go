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

// View is what a model is shown of one stream's raw bytes: the cleaned
// text of its last lines within a budget, and exact counts, in raw bytes
// and newlines, of what comes before the first byte shown.
type View struct {
	Text                       []byte
	OmittedBytes, OmittedLines int64
	Removed                    Removed // what cleaning took out of Text
}

// TailView keeps the last lines of raw whose cleaned text fits budget code
// points. Cleaning is line by line (nothing Clean handles spans a newline),
// so the cut falls between raw lines and the counts are exact; only when
// the last line alone is longer than the budget is the cut inside it (on
// its cleaned text, which there counts for the raw bytes). With partial,
// raw begins inside a line, and that piece is left out when a whole line
// follows it.
func TailView(raw []byte, budget int, partial bool) View {
	budget = max(budget, 0)
	floor := 0
	if partial {
		if i := bytes.IndexByte(raw, '\n'); i >= 0 && i+1 < len(raw) {
			floor = i + 1
		}
	}
	var kept [][]byte // cleaned lines, last first
	var removed Removed
	same := true // every kept line is its raw bytes, unchanged
	used, pos := 0, len(raw)
	for pos > floor {
		start := floor
		if i := bytes.LastIndexByte(raw[floor:pos-1], '\n'); i >= 0 {
			start = floor + i + 1
		}
		line, r := Clean(raw[start:pos])
		n := utf8.RuneCount(line)
		if used+n > budget {
			if len(kept) == 0 {
				// The last line alone is too long: its tail.
				c := Tail(line, budget, false)
				// Cleaned bytes stand for raw ones here, within the line.
				within := min(max(int64(pos-start)-int64(len(c.Text)), 0), int64(pos-start))
				return View{
					Text:         c.Text,
					OmittedBytes: int64(start) + within,
					OmittedLines: int64(bytes.Count(raw[:start], newline)) + c.OmittedLines,
					Removed:      r,
				}
			}
			break
		}
		kept = append(kept, line)
		removed = removed.Add(r)
		same = same && len(line) == pos-start && (len(line) == 0 || &line[0] == &raw[start])
		used += n
		pos = start
	}
	v := View{OmittedBytes: int64(pos), OmittedLines: int64(bytes.Count(raw[:pos], newline)), Removed: removed}
	if same {
		v.Text = raw[pos:] // nothing to clean: no copy
		return v
	}
	for i := len(kept) - 1; i >= 0; i-- {
		v.Text = append(v.Text, kept[i]...)
	}
	return v
}
