package retention

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTextRetainer(t *testing.T) {
	const (
		e2 = "é" // C3 A9
		e3 = "€" // E2 82 AC
		e4 = "😀" // F0 9F 98 80
	)
	for _, tc := range []struct {
		name       string
		s          Strategy
		max        int
		in         string
		head, tail string
		bytes      int64
		lines      int64
	}{
		// Empty input.
		{name: "empty head", s: Head, max: 10},
		{name: "empty tail", s: Tail, max: 10},
		{name: "empty headTail", s: HeadTail, max: 10},
		{name: "empty zero budget", s: HeadTail, max: 0},

		// Exactly the budget: everything kept, in Head.
		{name: "exact head", s: Head, max: 5, in: "hello", head: "hello"},
		{name: "exact tail", s: Tail, max: 5, in: "hello", head: "hello"},
		{name: "exact headTail", s: HeadTail, max: 5, in: "hello", head: "hello"},
		{name: "under budget tail", s: Tail, max: 50, in: "a\nb\n", head: "a\nb\n"},
		{name: "under budget headTail", s: HeadTail, max: 50, in: "a\nb\n", head: "a\nb\n"},

		// One byte over.
		{name: "over head", s: Head, max: 5, in: "hello!", head: "hello", bytes: 1, lines: 1},
		{name: "over tail", s: Tail, max: 5, in: "hello!", tail: "ello!", bytes: 1, lines: 1},
		{name: "over headTail", s: HeadTail, max: 5, in: "hello!", head: "he", tail: "lo!", bytes: 1, lines: 1},
		{name: "headTail of 1 is a tail", s: HeadTail, max: 1, in: "ab", tail: "b", bytes: 1, lines: 1},

		// Line accounting.
		{name: "doc example", s: Head, max: 6, in: "one\ntwo\nthree\n", head: "one\ntw", bytes: 8, lines: 2},
		{name: "head lines", s: Head, max: 4, in: "ab\ncd\nef\n", head: "ab\nc", bytes: 5, lines: 2},
		{name: "head drops only a newline", s: Head, max: 3, in: "abc\n", head: "abc", bytes: 1, lines: 1},
		{name: "head drops a newline and a line", s: Head, max: 3, in: "abc\nd", head: "abc", bytes: 2, lines: 2},
		{name: "head no newline", s: Head, max: 2, in: "abcdef", head: "ab", bytes: 4, lines: 1},
		{name: "tail whole lines", s: Tail, max: 3, in: "ab\ncd\nef\n", tail: "ef\n", bytes: 6, lines: 2},
		{name: "tail partial line", s: Tail, max: 4, in: "ab\ncd\nef\n", tail: "\nef\n", bytes: 5, lines: 2},
		{name: "tail mid line", s: Tail, max: 2, in: "abcdef", tail: "ef", bytes: 4, lines: 1},
		{name: "headTail whole lines", s: HeadTail, max: 6, in: "l1\nl2\nl3\nl4\n", head: "l1\n", tail: "l4\n", bytes: 6, lines: 2},
		{name: "headTail inside one line", s: HeadTail, max: 4, in: "abcdefgh\n", head: "ab", tail: "h\n", bytes: 5, lines: 1},
		{name: "headTail only newlines", s: HeadTail, max: 2, in: "\n\n\n\n\n", head: "\n", tail: "\n", bytes: 3, lines: 3},

		// Multi-byte code points at the head cut: the cut moves back.
		{name: "head 2-byte split", s: Head, max: 2, in: "a" + e2 + "b", head: "a", bytes: 3, lines: 1},
		{name: "head 2-byte whole", s: Head, max: 3, in: "a" + e2 + "b", head: "a" + e2, bytes: 1, lines: 1},
		{name: "head 3-byte split after 1", s: Head, max: 2, in: "a" + e3 + "b", head: "a", bytes: 4, lines: 1},
		{name: "head 3-byte split after 2", s: Head, max: 3, in: "a" + e3 + "b", head: "a", bytes: 4, lines: 1},
		{name: "head 3-byte whole", s: Head, max: 4, in: "a" + e3 + "b", head: "a" + e3, bytes: 1, lines: 1},
		{name: "head 4-byte split after 3", s: Head, max: 4, in: "a" + e4 + "b", head: "a", bytes: 5, lines: 1},
		{name: "head 4-byte whole", s: Head, max: 5, in: "a" + e4 + "b", head: "a" + e4, bytes: 1, lines: 1},

		// Multi-byte code points at the tail cut: the cut moves forward.
		{name: "tail 2-byte split", s: Tail, max: 2, in: "a" + e2 + "b", tail: "b", bytes: 3, lines: 1},
		{name: "tail 2-byte whole", s: Tail, max: 3, in: "a" + e2 + "b", tail: e2 + "b", bytes: 1, lines: 1},
		{name: "tail 3-byte split before 1", s: Tail, max: 2, in: "a" + e3 + "b", tail: "b", bytes: 4, lines: 1},
		{name: "tail 3-byte split before 2", s: Tail, max: 3, in: "a" + e3 + "b", tail: "b", bytes: 4, lines: 1},
		{name: "tail 3-byte whole", s: Tail, max: 4, in: "a" + e3 + "b", tail: e3 + "b", bytes: 1, lines: 1},
		{name: "tail 4-byte split before 1", s: Tail, max: 2, in: "a" + e4 + "b", tail: "b", bytes: 5, lines: 1},
		{name: "tail 4-byte split before 3", s: Tail, max: 4, in: "a" + e4 + "b", tail: "b", bytes: 5, lines: 1},
		{name: "tail 4-byte whole", s: Tail, max: 5, in: "a" + e4 + "b", tail: e4 + "b", bytes: 1, lines: 1},
		{name: "tail split at the last byte", s: Tail, max: 1, in: "a" + e2, bytes: 3, lines: 1},
		{name: "headTail both cuts split", s: HeadTail, max: 6, in: "a" + e3 + "b" + e3 + "c", head: "a", tail: "c", bytes: 7, lines: 1},
		{name: "headTail both cuts in one code point", s: HeadTail, max: 3, in: e4, bytes: 4, lines: 1},
		{name: "headTail keeps whole code points", s: HeadTail, max: 16, in: e4 + e4 + "x" + e4 + e4, head: e4 + e4, tail: e4 + e4, bytes: 1, lines: 1},

		// A budget smaller than one code point keeps nothing of it.
		{name: "head smaller than a code point", s: Head, max: 3, in: e4, bytes: 4, lines: 1},
		{name: "tail smaller than a code point", s: Tail, max: 1, in: e2, bytes: 2, lines: 1},
		{name: "tail smaller than a code point 4", s: Tail, max: 3, in: e4 + "\n", tail: "\n", bytes: 4, lines: 1},

		// Zero and negative budgets keep nothing.
		{name: "zero head", s: Head, max: 0, in: "abc", bytes: 3, lines: 1},
		{name: "zero tail", s: Tail, max: 0, in: "a\nb\n", bytes: 4, lines: 2},
		{name: "negative tail", s: Tail, max: -5, in: "a\nb\n", bytes: 4, lines: 2},
		{name: "negative headTail", s: HeadTail, max: -1, in: "a\nb", bytes: 3, lines: 2},

		// Invalid input is kept as it is; only a sequence that really
		// continues across a cut moves it.
		{name: "invalid kept head", s: Head, max: 2, in: "\xff\xfeabc", head: "\xff\xfe", bytes: 3, lines: 1},
		{name: "invalid kept tail", s: Tail, max: 2, in: "ab\x80\x80", tail: "\x80\x80", bytes: 2, lines: 1},
		{name: "unfinished sequence before head cut", s: Head, max: 2, in: "a\xe2b", head: "a\xe2", bytes: 1, lines: 1},
		{name: "overlong lead at head cut", s: Head, max: 1, in: "\xc0\x80", head: "\xc0", bytes: 1, lines: 1},
		{name: "surrogate at head cut", s: Head, max: 1, in: "\xed\xa0\x80", head: "\xed", bytes: 2, lines: 1},
		{name: "surrogate at tail cut", s: Tail, max: 2, in: "\xed\xa0\x80", tail: "\xa0\x80", bytes: 1, lines: 1},
		{name: "stray continuations at tail cut", s: Tail, max: 1, in: "a\x80\x80\x80\x80", tail: "\x80", bytes: 4, lines: 1},
		{name: "truncated sequence at the end", s: Tail, max: 1, in: "x\xe2\x82", bytes: 3, lines: 1},
		{name: "sequence broken after the tail cut", s: Tail, max: 2, in: "\xf0\x9f\x98x", tail: "x", bytes: 3, lines: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := TextResult{
				Head: tc.head, Tail: tc.tail,
				Omitted: Omitted{Bytes: tc.bytes, Lines: tc.lines},
				Total:   int64(len(tc.in)),
			}
			for _, chunk := range []int{0, 1, 2, 3, 7} {
				if got := retain(tc.s, tc.max, tc.in, chunk); got != want {
					t.Errorf("%v %d %q chunk %d:\n got %#v\nwant %#v", tc.s, tc.max, tc.in, chunk, got, want)
				}
			}
			if got := oracle(tc.s, tc.max, []byte(tc.in)); got != want {
				t.Errorf("oracle disagrees with the table:\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

// TestCutsAtEveryPosition puts 2-, 3- and 4-byte code points at every
// position relative to every cut and checks that the kept text is the
// longest that fits the budget and does not split a code point.
func TestCutsAtEveryPosition(t *testing.T) {
	for _, c := range []string{"é", "€", "😀"} {
		for pad := 0; pad < 6; pad++ {
			in := strings.Repeat("a", pad) + c + "b" + c + strings.Repeat("z", pad) + c
			for _, s := range []Strategy{Head, Tail, HeadTail} {
				for maxBytes := -1; maxBytes <= len(in)+1; maxBytes++ {
					got := retain(s, maxBytes, in, 0)
					checkValidCuts(t, s, maxBytes, in, got)
				}
			}
		}
	}
}

// checkValidCuts checks a result for valid UTF-8 input against the plain
// definition: the longest prefix and suffix that fit and end (start) at a
// code point boundary.
func checkValidCuts(t *testing.T, s Strategy, maxBytes int, in string, got TextResult) {
	t.Helper()
	headCap, tailCap := budgets(s, maxBytes)
	want := TextResult{Total: int64(len(in))}
	if len(in) <= headCap+tailCap {
		want.Head = in
	} else {
		h := headCap
		for h > 0 && !utf8.RuneStart(in[h]) {
			h--
		}
		tl := len(in) - tailCap
		for tl < len(in) && !utf8.RuneStart(in[tl]) {
			tl++
		}
		want.Head, want.Tail = in[:h], in[tl:]
		dropped := in[h:tl]
		want.Omitted.Bytes = int64(len(dropped))
		want.Omitted.Lines = int64(strings.Count(dropped, "\n"))
		if !strings.HasSuffix(dropped, "\n") {
			want.Omitted.Lines++
		}
	}
	if got != want {
		t.Errorf("%v %d %q:\n got %#v\nwant %#v", s, maxBytes, in, got, want)
	}
	if !utf8.ValidString(got.Head) || !utf8.ValidString(got.Tail) {
		t.Errorf("%v %d %q: invalid UTF-8 out: %#v", s, maxBytes, in, got)
	}
}

func TestChunkingIndependence(t *testing.T) {
	var long strings.Builder
	for i := range 200 {
		fmt.Fprintf(&long, "line %d: héllo wörld € 😀 %s\n", i, strings.Repeat("x", i%13))
	}
	inputs := []string{
		"",
		"a",
		"\n",
		"no newline at all",
		"ab\ncd\nef\n",
		"😀😀😀😀😀",
		"é€😀\n😀€é",
		"\xff\xfe\x80\xe2\x82\n\xf0\x9f",
		long.String(),
	}
	for _, in := range inputs {
		for _, s := range []Strategy{Head, Tail, HeadTail} {
			for _, maxBytes := range []int{-1, 0, 1, 2, 3, 4, 5, 7, 8, 13, 64, 100, 1000, len(in) - 1, len(in), len(in) + 1} {
				want := retain(s, maxBytes, in, 0)
				if o := oracle(s, maxBytes, []byte(in)); o != want {
					t.Fatalf("%v %d %q: retainer %#v, oracle %#v", s, maxBytes, in, want, o)
				}
				for _, chunk := range []int{1, 2, 3, 7} {
					if got := retain(s, maxBytes, in, chunk); got != want {
						t.Fatalf("%v %d %q chunk %d:\n got %#v\nwant %#v", s, maxBytes, in, chunk, got, want)
					}
				}
			}
		}
	}
}

func TestResultDoesNotConsume(t *testing.T) {
	in := []byte(strings.Repeat("0123456789€\n", 50))
	for _, s := range []Strategy{Head, Tail, HeadTail} {
		r := NewTextRetainer(s, 40)
		for i := 0; i < len(in); i += 5 {
			part := in[i:min(i+5, len(in))]
			r.Write(part)
			a, b := r.Result(), r.Result()
			if a != b {
				t.Fatalf("%v: two Results differ: %#v, %#v", s, a, b)
			}
			if want := oracle(s, 40, in[:min(i+5, len(in))]); a != want {
				t.Fatalf("%v after %d bytes: got %#v want %#v", s, r.Total(), a, want)
			}
		}
		if got, want := r.Result(), oracle(s, 40, in); got != want {
			t.Fatalf("%v: got %#v want %#v", s, got, want)
		}
	}
}

func TestWrite(t *testing.T) {
	r := NewTextRetainer(Tail, 4)
	for _, p := range [][]byte{nil, {}, []byte("abc"), []byte("defgh")} {
		n, err := r.Write(p)
		if n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if r.Total() != 8 {
		t.Fatalf("Total = %d, want 8", r.Total())
	}
}

func TestHugeBudget(t *testing.T) {
	for _, s := range []Strategy{Head, Tail, HeadTail} {
		if got, want := retain(s, math.MaxInt, "a\nb", 1), (TextResult{Head: "a\nb", Total: 3}); got != want {
			t.Errorf("%v: got %#v want %#v", s, got, want)
		}
	}
}

func TestZeroTextRetainer(t *testing.T) {
	var r TextRetainer
	r.Write([]byte("a\nb"))
	want := TextResult{Omitted: Omitted{Bytes: 3, Lines: 2}, Total: 3}
	if got := r.Result(); got != want {
		t.Fatalf("got %#v want %#v", got, want)
	}
}

func TestNewTextRetainerInvalidStrategy(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for Strategy(7)")
		}
	}()
	NewTextRetainer(Strategy(7), 10)
}

func TestTextResultString(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  TextResult
		want string
	}{
		{"empty", TextResult{}, ""},
		{"whole", TextResult{Head: "a\nb\n", Total: 4}, "a\nb\n"},
		{"head", TextResult{Head: "ab", Omitted: Omitted{Bytes: 1, Lines: 1}}, "ab\n[1 byte (1 line) omitted]"},
		{"head ending a line", TextResult{Head: "ab\n", Omitted: Omitted{Bytes: 3, Lines: 1}}, "ab\n[3 bytes (1 line) omitted]"},
		{"tail", TextResult{Tail: "cd\n", Omitted: Omitted{Bytes: 2, Lines: 1}}, "[2 bytes (1 line) omitted]\ncd\n"},
		{"headTail", TextResult{Head: "ab", Tail: "cd", Omitted: Omitted{Bytes: 1234, Lines: 56}}, "ab\n[1,234 bytes (56 lines) omitted]\ncd"},
		{"nothing kept", TextResult{Omitted: Omitted{Bytes: 4, Lines: 1}}, "[4 bytes (1 line) omitted]"},
	} {
		if got := tc.res.String(); got != tc.want {
			t.Errorf("%s: got %q want %q", tc.name, got, tc.want)
		}
	}
	res := retain(HeadTail, 6, "l1\nl2\nl3\nl4\n", 0)
	if got, want := res.String(), "l1\n[6 bytes (2 lines) omitted]\nl4\n"; got != want {
		t.Errorf("retained headTail: got %q want %q", got, want)
	}
	if !res.Truncated() || retain(Tail, 100, "x", 0).Truncated() {
		t.Errorf("Truncated is wrong")
	}
}

// TestMemoryBounded feeds 100 MiB into 1 KiB retainers: the buffers stay
// within the budget and writing allocates nothing once they are full.
func TestMemoryBounded(t *testing.T) {
	const (
		budget = 1 << 10
		total  = 100 << 20
	)
	chunk := bytes.Repeat([]byte("0123456789abcdef€\n"), 64<<10/20) // ~64 KiB, not a multiple of the budget
	feed := func(r *TextRetainer) {
		for written := 0; written < total; written += len(chunk) {
			r.Write(chunk)
		}
	}
	for _, s := range []Strategy{Tail, HeadTail, Head} {
		t.Run(s.String(), func(t *testing.T) {
			r := NewTextRetainer(s, budget)
			feed(r)
			if allocs := testing.AllocsPerRun(1, func() { feed(r) }); allocs != 0 {
				t.Errorf("writing 100 MiB more allocated %v times", allocs)
			}
			if c := cap(r.head) + cap(r.ring); c > budget+margin {
				t.Errorf("buffers hold %d bytes for a budget of %d", c, budget)
			}
			if r.Total() < 3*total {
				t.Fatalf("only %d bytes written", r.Total())
			}
			got := r.Result()
			if got.Total != r.Total() || int64(len(got.Head)+len(got.Tail))+got.Omitted.Bytes != got.Total {
				t.Errorf("byte accounting broken: %d+%d+%d != %d", len(got.Head), len(got.Tail), got.Omitted.Bytes, got.Total)
			}
			wantLines := r.Total()/int64(len(chunk))*int64(bytes.Count(chunk, []byte{'\n'})) -
				int64(strings.Count(got.Head, "\n")+strings.Count(got.Tail, "\n"))
			if lastDropped := (got.Total - int64(len(got.Tail)) - 1) % int64(len(chunk)); chunk[lastDropped] != '\n' {
				wantLines++
			}
			if got.Omitted.Lines != wantLines {
				t.Errorf("Lines = %d, want %d", got.Omitted.Lines, wantLines)
			}
			if len(got.Head)+len(got.Tail) < budget-2*margin {
				t.Errorf("kept only %d bytes of a %d budget", len(got.Head)+len(got.Tail), budget)
			}
		})
	}
}

func TestWithoutLineCount(t *testing.T) {
	in := []byte(strings.Repeat("line one\nzwei €\n", 500) + "tail without newline")
	for _, st := range []Strategy{Head, Tail, HeadTail} {
		for _, max := range []int{0, 1, 7, 100, 5000, 100000} {
			with, without := NewTextRetainer(st, max), NewTextRetainer(st, max, WithoutLineCount())
			for i := 0; i < len(in); i += 97 {
				end := min(i+97, len(in))
				_, _ = with.Write(in[i:end])
				_, _ = without.Write(in[i:end])
			}
			a, b := with.Result(), without.Result()
			if a.Head != b.Head || a.Tail != b.Tail || a.Total != b.Total || a.Omitted.Bytes != b.Omitted.Bytes {
				t.Fatalf("%v/%d: results differ beyond lines: %+v vs %+v", st, max, a.Omitted, b.Omitted)
			}
			if b.Omitted.Lines != 0 {
				t.Fatalf("%v/%d: lines counted anyway: %d", st, max, b.Omitted.Lines)
			}
			if b.Omitted.Bytes > 0 && !strings.Contains(b.String(), "bytes omitted]") && !strings.Contains(b.String(), "byte omitted]") {
				t.Fatalf("%v/%d: notice %q", st, max, b.String())
			}
		}
	}
}
