package retention

import "unicode/utf8"

// A cut is a position between two bytes of the input. It falls inside a
// code point when the bytes just before it are the beginning of a multi-byte
// UTF-8 sequence (a lead byte and fewer continuation bytes than it needs)
// and the byte just after it continues that sequence validly. A cut that
// falls inside a code point is moved: a head cut back to the lead byte, a
// tail cut forward past the continuation bytes that carry on the sequence.
// When the input is valid UTF-8 this is exactly "the cut splits a code
// point". Bytes that are invalid in the input itself are never a reason to
// move a cut, so they are kept or dropped like any other byte.

// straddle reports how a cut falls inside a code point. before holds the
// bytes just before the cut (at least the last utf8.UTFMax-1 of them, or all
// there are), after the bytes just after it (at least utf8.UTFMax-1 of them,
// or all there are; one is enough for back). back is how many bytes of the
// code point lie before the cut, fwd how many after; both are 0 when the cut
// is at a boundary.
func straddle(before, after []byte) (back, fwd int) {
	lead := -1
	for i := len(before) - 1; i >= 0 && i >= len(before)-(utf8.UTFMax-1); i-- {
		if !isContinuation(before[i]) {
			lead = i
			break
		}
	}
	if lead < 0 {
		return 0, 0
	}
	seq := before[lead:]
	n := sequenceLen(seq[0])
	if n <= len(seq) || !validPrefix(seq) {
		return 0, 0
	}
	var buf [utf8.UTFMax]byte
	k := copy(buf[:], seq)
	for k < n && fwd < len(after) {
		buf[k] = after[fwd]
		if !validPrefix(buf[:k+1]) {
			break
		}
		k++
		fwd++
	}
	if fwd == 0 {
		return 0, 0
	}
	return len(seq), fwd
}

func isContinuation(b byte) bool { return b&0xC0 == 0x80 }

// sequenceLen returns the length of the UTF-8 encoding that lead byte b
// starts, or 0 when b cannot start a multi-byte encoding.
func sequenceLen(b byte) int {
	switch {
	case b >= 0xC2 && b <= 0xDF:
		return 2
	case b >= 0xE0 && b <= 0xEF:
		return 3
	case b >= 0xF0 && b <= 0xF4:
		return 4
	}
	return 0
}

// validPrefix reports whether b (one to four bytes) is the beginning, or
// the whole, of the UTF-8 encoding of a multi-byte code point: no overlong
// forms, no surrogates, nothing above U+10FFFF.
func validPrefix(b []byte) bool {
	n := sequenceLen(b[0])
	if n == 0 || len(b) > n {
		return false
	}
	if len(b) == 1 {
		return true
	}
	lo, hi := byte(0x80), byte(0xBF)
	switch b[0] {
	case 0xE0:
		lo = 0xA0
	case 0xED:
		hi = 0x9F
	case 0xF0:
		lo = 0x90
	case 0xF4:
		hi = 0x8F
	}
	if b[1] < lo || b[1] > hi {
		return false
	}
	for _, c := range b[2:] {
		if !isContinuation(c) {
			return false
		}
	}
	return true
}
