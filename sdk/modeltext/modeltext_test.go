package modeltext

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	cases := []struct {
		name, in, want string
		removed        Removed
	}{
		{"plain", "a\tb\nc\n", "a\tb\nc\n", Removed{}},
		{"colours", "\x1b[1;31merror\x1b[0m: x\n", "error: x\n", Removed{Sequences: 2}},
		{"OSC 52 with BEL", "a\x1b]52;c;aGVsbG8=\x07b\n", "ab\n", Removed{Sequences: 1}},
		{"OSC 52 with ST", "a\x1b]52;c;aGVsbG8=\x1b\\b\n", "ab\n", Removed{Sequences: 1}},
		{"OSC hyperlink", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n", "link\n", Removed{Sequences: 2}},
		{"an OSC never terminated ends at the newline", "a\x1b]52;c;aGVsbG8=\nnext\n", "a\nnext\n", Removed{Sequences: 1}},
		{"DCS", "\x1bPq#0;2;0;0;0\x1b\\x\n", "x\n", Removed{Sequences: 1}},
		{"screen clear and home", "\x1b[2J\x1b[Hready\n", "ready\n", Removed{Sequences: 2}},
		{"progress bar", "progress 10%\rprogress 50%\rprogress 100%\ndone\n", "progress 100%\ndone\n", Removed{Overwrites: 2}},
		{"a shorter overwrite leaves what a terminal leaves", "abcdef\rxy\n", "xycdef\n", Removed{Overwrites: 1}},
		{"erase in line after CR", "downloading 99%\r\x1b[Kdone\n", "done\n", Removed{Overwrites: 1, Sequences: 1}},
		{"CRLF is a newline", "one\r\ntwo\r\n", "one\ntwo\n", Removed{}},
		{"a trailing CR changes nothing", "line\r", "line", Removed{}},
		{"backspaces", "abc\b\bX\n", "aXc\n", Removed{Controls: 2}},
		{"backspace over bold (man pages)", "N\bNAME\n", "NAME\n", Removed{Controls: 1}},
		{"bell and other C0", "a\x07b\x00c\x1f\n", "abc\n", Removed{Controls: 3}},
		{"DEL", "a\x7fb\n", "ab\n", Removed{Controls: 1}},
		{"C1 CSI", "a\u009b31mb\n", "ab\n", Removed{Sequences: 1}},
		{"C1 control", "a\u0085b\n", "ab\n", Removed{Controls: 1}},
		{"short ESC sequences", "\x1b(Ba\x1b7b\x1b=\n", "ab\n", Removed{Sequences: 3}},
		{"invalid UTF-8", "a\xffb\n", "a\uFFFDb\n", Removed{Invalid: 1}},
		{"wide text is kept", "héllo wörld 😀\r\x1b[32mok\x1b[0m\n", "okllo wörld 😀\n", Removed{Sequences: 2, Overwrites: 1}},
		{"cursor back and column", "abcdef\x1b[3DX\x1b[1GY\n", "YbcXef\n", Removed{Sequences: 2}},
		{"an ESC at the very end", "a\x1b", "a", Removed{Sequences: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, removed := Clean([]byte(tc.in))
			if string(got) != tc.want {
				t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if removed != tc.removed {
				t.Errorf("Clean(%q) removed %+v, want %+v", tc.in, removed, tc.removed)
			}
			if removed.Any() != (tc.removed != Removed{}) {
				t.Errorf("Any() = %v", removed.Any())
			}
		})
	}
	in := []byte("nothing to clean\n")
	if out, _ := Clean(in); &out[0] != &in[0] {
		t.Error("clean input was copied")
	}
}

func TestIsBinary(t *testing.T) {
	for in, want := range map[string]bool{
		"text\n":                               false,
		"":                                     false,
		"a\x00b":                               true,
		"\x7fELF\x02\x01\x01\x00":              true,
		"mostly text with one \xff byte in it": false,
		"a\xffb\n":                             false,
		"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0": true,
		"héllo wörld": false,
	} {
		if got := IsBinary([]byte(in)); got != want {
			t.Errorf("IsBinary(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestTail(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		budget  int
		partial bool
		want    string
	}{
		{"fits", "a\nb\n", 10, false, "a\nb\n"},
		{"line aligned", "290857\n290858\n290859\n", 10, false, "290859\n"},
		{"exactly at a boundary", "12345\n67890\n", 6, false, "67890\n"},
		{"the last line alone is too long", "short\n" + strings.Repeat("x", 20) + "\n", 5, false, "xxxx\n"},
		{"no newline at all", strings.Repeat("y", 20), 5, false, "yyyyy"},
		{"never inside a code point", "ééééé", 3, false, "ééé"},
		{"emoji", "😀😀😀\n😀\n", 3, false, "😀\n"},
		{"partial start is dropped", "858\n290859\n", 100, true, "290859\n"},
		{"partial start without a whole line after it", "858", 100, true, "858"},
		{"partial start, a line boundary then one line", "858\n1\n", 100, true, "1\n"},
		{"zero budget", "abc\n", 0, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Tail([]byte(tc.in), tc.budget, tc.partial)
			if string(c.Text) != tc.want {
				t.Fatalf("Tail(%q, %d, %v) = %q, want %q", tc.in, tc.budget, tc.partial, c.Text, tc.want)
			}
			checkCut(t, []byte(tc.in), tc.budget, c)
		})
	}
}

func checkCut(t *testing.T, in []byte, budget int, c Cut) {
	t.Helper()
	if !bytes.HasSuffix(in, c.Text) {
		t.Fatalf("%q is not a tail of %q", c.Text, in)
	}
	if c.OmittedBytes+int64(len(c.Text)) != int64(len(in)) {
		t.Fatalf("omitted %d + kept %d != %d", c.OmittedBytes, len(c.Text), len(in))
	}
	if want := int64(bytes.Count(in[:c.OmittedBytes], newline)); c.OmittedLines != want {
		t.Fatalf("omitted lines %d, want %d", c.OmittedLines, want)
	}
	if n := utf8.RuneCount(c.Text); n > max(budget, 0) {
		t.Fatalf("kept %d code points, budget %d", n, budget)
	}
	if utf8.Valid(in) && !utf8.Valid(c.Text) {
		t.Fatalf("the cut split a code point: %q", c.Text)
	}
}

func TestShare(t *testing.T) {
	for _, tc := range []struct{ budget, a, b, wa, wb int }{
		{30000, 100000, 100000, 15000, 15000},
		{30000, 1000, 100000, 1000, 29000},
		{30000, 100000, 1000, 29000, 1000},
		{30000, 10, 20, 10, 20},
		{30001, 100000, 100000, 15000, 15001},
		{0, 5, 5, 0, 0},
	} {
		if a, b := Share(tc.budget, tc.a, tc.b); a != tc.wa || b != tc.wb {
			t.Errorf("Share(%d, %d, %d) = %d, %d; want %d, %d", tc.budget, tc.a, tc.b, a, b, tc.wa, tc.wb)
		}
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"a\x1b[31mb\r\nc\rd\x08e", "\x1b]52;c;x\x07", "\u009b1m\u009dx\u009c", "\xff\xfe", "a\r\x1b[Kb"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, _ := Clean(in)
		if !utf8.Valid(out) {
			t.Fatalf("Clean(%q) = %q: not UTF-8", in, out)
		}
		for _, r := range string(out) {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("Clean(%q) = %q: control %U left", in, out, r)
			}
		}
		if bytes.Count(out, newline) != bytes.Count(in, newline) {
			t.Fatalf("Clean(%q) = %q: lines changed", in, out)
		}
		again, removed := Clean(out)
		if !bytes.Equal(again, out) || removed.Any() {
			t.Fatalf("Clean is not idempotent on %q: %q", out, again)
		}
	})
}

func FuzzTail(f *testing.F) {
	f.Add([]byte("a\nbb\nccc\n"), 3, false)
	f.Add([]byte("é😀\nx"), 1, true)
	f.Fuzz(func(t *testing.T, in []byte, budget int, partial bool) {
		budget %= 1 << 12
		checkCut(t, in, budget, Tail(in, budget, partial))
	})
}

func TestTailView(t *testing.T) {
	cases := []struct {
		name         string
		in           string
		budget       int
		partial      bool
		want         string
		bytes, lines int64
	}{
		{"fits", "a\nb\n", 10, false, "a\nb\n", 0, 0},
		{"whole lines", "290857\n290858\n290859\n", 14, false, "290858\n290859\n", 7, 1},
		{"cleaned lines count cleaned", "\x1b[31mred\x1b[0m\n\x1b[32mgreen\x1b[0m\n", 10, false, "red\ngreen\n", 0, 0},
		{"the cut is between raw lines", "\x1b[31mred\x1b[0m\n\x1b[32mgreen\x1b[0m\n", 6, false, "green\n", 13, 1},
		{"a progress bar is one line", "10%\r50%\r100%\ndone\n", 10, false, "100%\ndone\n", 0, 0},
		{"the last line alone is too long", "ab\n" + strings.Repeat("x", 10), 4, false, "xxxx", 9, 1},
		{"partial start left out", "858\n290859\n", 100, true, "290859\n", 4, 1},
		{"a partial line only", "858", 100, true, "858", 0, 0},
		{"zero budget", "abc\n", 0, false, "", 4, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := TailView([]byte(tc.in), tc.budget, tc.partial)
			if string(v.Text) != tc.want || v.OmittedBytes != tc.bytes || v.OmittedLines != tc.lines {
				t.Fatalf("TailView(%q, %d, %v) = %q, %d bytes, %d lines omitted; want %q, %d, %d",
					tc.in, tc.budget, tc.partial, v.Text, v.OmittedBytes, v.OmittedLines, tc.want, tc.bytes, tc.lines)
			}
		})
	}
}

func FuzzTailView(f *testing.F) {
	f.Add([]byte("a\x1b[1mb\nc\rd\n"), 3, false)
	f.Add([]byte("é😀\n\x1b]52;c;x\nx"), 2, true)
	f.Fuzz(func(t *testing.T, in []byte, budget int, partial bool) {
		budget %= 1 << 12
		v := TailView(in, budget, partial)
		if n := utf8.RuneCount(v.Text); n > max(budget, 0) {
			t.Fatalf("%d code points shown, budget %d", n, budget)
		}
		if !utf8.Valid(v.Text) {
			t.Fatalf("not UTF-8: %q", v.Text)
		}
		if v.OmittedBytes < 0 || v.OmittedBytes > int64(len(in)) {
			t.Fatalf("omitted %d of %d bytes", v.OmittedBytes, len(in))
		}
		// Cleaning is line by line: what is shown ends the cleaned input.
		if all, _ := Clean(in); !bytes.HasSuffix(all, v.Text) {
			t.Fatalf("%q is not a tail of the cleaned input %q", v.Text, all)
		}
		// Whole raw lines shown: the text is the cleaned rest of the input,
		// and the counts are exact.
		if rest, _ := Clean(in[v.OmittedBytes:]); bytes.Equal(rest, v.Text) {
			if want := int64(bytes.Count(in[:v.OmittedBytes], newline)); v.OmittedLines != want {
				t.Fatalf("omitted lines %d, want %d", v.OmittedLines, want)
			}
		}
	})
}
