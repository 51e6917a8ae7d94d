package retention

import (
	"testing"
	"unicode/utf8"
)

// TestValidPrefix compares validPrefix with the standard library's decoder
// on every one- and two-byte sequence and on three- and four-byte sequences
// built from the bytes at the edges of the valid ranges.
func TestValidPrefix(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		if got, want := validPrefix(b), oracleValidPrefix(b); got != want {
			t.Fatalf("validPrefix(% x) = %v, want %v", b, got, want)
		}
	}
	for a := range 256 {
		check([]byte{byte(a)})
		for b := range 256 {
			check([]byte{byte(a), byte(b)})
		}
	}
	edges := []byte{0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF}
	for _, a := range edges {
		for _, b := range edges {
			for _, c := range edges {
				check([]byte{a, b, c})
				for _, d := range edges {
					check([]byte{a, b, c, d})
				}
			}
		}
	}
	// Every proper prefix of every encoded rune is a valid prefix.
	for r := rune(0x80); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		enc := utf8.AppendRune(nil, r)
		for n := 1; n <= len(enc); n++ {
			if !validPrefix(enc[:n]) {
				t.Fatalf("validPrefix(% x) = false for a prefix of %U", enc[:n], r)
			}
		}
	}
}

func TestStraddle(t *testing.T) {
	for _, tc := range []struct {
		before, after string
		back, fwd     int
	}{
		{"", "", 0, 0},
		{"ab", "cd", 0, 0},
		{"a", "", 0, 0},
		{"a\xc3", "\xa9b", 1, 1},
		{"\xe2", "\x82\xac", 1, 2},
		{"\xe2\x82", "\xac", 2, 1},
		{"\xf0", "\x9f\x98\x80", 1, 3},
		{"\xf0\x9f", "\x98\x80", 2, 2},
		{"\xf0\x9f\x98", "\x80x", 3, 1},
		{"\xf0\x9f\x98\x80", "x", 0, 0}, // a whole code point before the cut
		{"\xc3\xa9", "\xa9", 0, 0},      // a stray continuation after a whole one
		{"\xe2", "b", 0, 0},             // unfinished in the input itself
		{"\xe2", "", 0, 0},              // nothing after the cut (yet)
		{"\xf0\x9f", "\x98", 2, 1},      // continues as far as the input goes
		{"\xf0\x9f", "\x98x", 2, 1},     // continues one byte, then breaks
		{"\xed", "\xa0\x80", 0, 0},      // a surrogate is not a code point
		{"\xe0", "\x80\x80", 0, 0},      // overlong
		{"\xf4", "\x90\x80\x80", 0, 0},  // above U+10FFFF
		{"\x80\x80\x80", "\x80", 0, 0},  // no lead byte within reach
		{"\xc3", "\xa9", 1, 1},
	} {
		back, fwd := straddle([]byte(tc.before), []byte(tc.after))
		if back != tc.back || fwd != tc.fwd {
			t.Errorf("straddle(%q, %q) = %d, %d; want %d, %d", tc.before, tc.after, back, fwd, tc.back, tc.fwd)
		}
	}
}
