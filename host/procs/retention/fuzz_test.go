package retention

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzTextRetainer(f *testing.F) {
	f.Add([]byte(""), uint8(0), int16(10), uint64(0))
	f.Add([]byte("hello\nworld\n"), uint8(0), int16(5), uint64(1))
	f.Add([]byte("hello\nworld\n"), uint8(1), int16(5), uint64(2))
	f.Add([]byte("hello\nworld\n"), uint8(2), int16(5), uint64(3))
	f.Add([]byte("é€😀\n😀€é\nabc"), uint8(2), int16(7), uint64(4))
	f.Add([]byte("😀😀😀😀😀😀😀😀"), uint8(1), int16(3), uint64(5))
	f.Add([]byte("\xff\xfe\x80\xe2\x82\n\xf0\x9f\xed\xa0\x80\xc0\x80"), uint8(2), int16(4), uint64(6))
	f.Add([]byte(strings.Repeat("line ü\n", 100)), uint8(1), int16(64), uint64(7))
	f.Add([]byte("abc"), uint8(0), int16(-1), uint64(8))
	f.Fuzz(func(t *testing.T, data []byte, strategy uint8, budget int16, seed uint64) {
		s := Strategy(strategy % 3)
		maxBytes := int(budget) % 300
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		maxChunk := 1 + rng.IntN(17)

		r := NewTextRetainer(s, maxBytes)
		written, checks := 0, 0
		for written < len(data) {
			k := min(rng.IntN(maxChunk+1), len(data)-written) // sometimes an empty write
			if n, err := r.Write(data[written : written+k]); n != k || err != nil {
				t.Fatalf("Write of %d bytes = %d, %v", k, n, err)
			}
			written += k
			if checks < 16 && rng.IntN(4) == 0 {
				checks++
				checkResult(t, s, maxBytes, data[:written], r.Result())
			}
		}
		got := r.Result()
		checkResult(t, s, maxBytes, data, got)
		if again := r.Result(); again != got {
			t.Fatalf("a second Result differs: %#v, %#v", again, got)
		}
		if once := retain(s, maxBytes, string(data), 0); once != got {
			t.Fatalf("chunking changed the result:\nchunked %#v\n   once %#v", got, once)
		}
	})
}

// checkResult checks everything the package promises about res, the result
// of retaining input with strategy s and budget maxBytes.
func checkResult(t *testing.T, s Strategy, maxBytes int, input []byte, res TextResult) {
	t.Helper()
	total := int64(len(input))
	if res.Total != total {
		t.Fatalf("Total %d, wrote %d", res.Total, total)
	}
	if int64(len(res.Head))+int64(len(res.Tail))+res.Omitted.Bytes != total {
		t.Fatalf("%d+%d+%d != %d", len(res.Head), len(res.Tail), res.Omitted.Bytes, total)
	}
	if !bytes.HasPrefix(input, []byte(res.Head)) || !bytes.HasSuffix(input, []byte(res.Tail)) {
		t.Fatalf("Head %q / Tail %q are not a prefix / suffix of %q", res.Head, res.Tail, input)
	}
	if res.Omitted.Items != 0 {
		t.Fatalf("a TextRetainer omitted items: %+v", res.Omitted)
	}
	headCap, tailCap := budgets(s, maxBytes)
	if !res.Truncated() {
		if res.Head != string(input) || res.Tail != "" || res.Omitted != (Omitted{}) {
			t.Fatalf("nothing omitted but the text is not whole in Head: %#v", res)
		}
		if len(input) > headCap+tailCap {
			t.Fatalf("%d bytes kept whole with a budget of %d", len(input), maxBytes)
		}
		if res.String() != string(input) {
			t.Fatalf("String of a whole result = %q", res.String())
		}
	} else {
		if len(res.Head) > headCap || len(res.Tail) > tailCap {
			t.Fatalf("kept %d+%d bytes with budgets %d+%d", len(res.Head), len(res.Tail), headCap, tailCap)
		}
		// A cut moves over at most the part of one code point.
		if len(res.Head) < headCap-margin || len(res.Tail) < tailCap-margin {
			t.Fatalf("kept only %d+%d bytes with budgets %d+%d", len(res.Head), len(res.Tail), headCap, tailCap)
		}
		dropped := input[len(res.Head) : len(input)-len(res.Tail)]
		lines := int64(bytes.Count(dropped, []byte{'\n'}))
		if dropped[len(dropped)-1] != '\n' {
			lines++
		}
		if res.Omitted.Lines != lines || lines == 0 {
			t.Fatalf("Lines %d, want %d (dropped %q)", res.Omitted.Lines, lines, dropped)
		}
		if str := res.String(); !strings.Contains(str, FormatNotice(res.Omitted)) ||
			!strings.HasPrefix(str, res.Head) || !strings.HasSuffix(str, res.Tail) {
			t.Fatalf("String = %q for %#v", str, res)
		}
	}
	if utf8.Valid(input) && (!utf8.ValidString(res.Head) || !utf8.ValidString(res.Tail)) {
		t.Fatalf("valid UTF-8 in, invalid out: %#v", res)
	}
	if want := oracle(s, maxBytes, input); res != want {
		t.Fatalf("%v %d %q:\n got %#v\nwant %#v", s, maxBytes, input, res, want)
	}
}

func FuzzItemRetainer(f *testing.F) {
	f.Add([]byte(""), int16(0))
	f.Add([]byte("abc"), int16(0))
	f.Add([]byte("abc"), int16(2))
	f.Add([]byte("abc"), int16(3))
	f.Add([]byte("abcdef"), int16(-4))
	f.Add([]byte("abcdef"), int16(100))
	f.Fuzz(func(t *testing.T, data []byte, maxItems int16) {
		r := NewItemRetainer[byte](int(maxItems))
		keep := min(max(int(maxItems), 0), len(data))
		for i, b := range data {
			if kept := r.Add(b); kept != (i < keep) {
				t.Fatalf("Add #%d = %v with max %d", i, kept, maxItems)
			}
		}
		if got := r.Items(); !bytes.Equal(got, data[:keep]) || (keep == 0) != (got == nil) {
			t.Fatalf("Items = %q, want %q", got, data[:keep])
		}
		o := r.Omitted()
		if o != (Omitted{Items: int64(len(data) - keep)}) || r.Total() != int64(len(data)) {
			t.Fatalf("Omitted %+v, Total %d for %d items, max %d", o, r.Total(), len(data), maxItems)
		}
		if o.Any() != (keep < len(data)) || (FormatNotice(o) == "") == o.Any() {
			t.Fatalf("Any %v, notice %q for %+v", o.Any(), FormatNotice(o), o)
		}
		if cap(r.items) > max(int(maxItems), 0) {
			t.Fatalf("room for %d items with max %d", cap(r.items), maxItems)
		}
	})
}
