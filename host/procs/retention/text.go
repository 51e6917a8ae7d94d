package retention

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// margin is how many bytes before the tail window the ring also keeps: the
// most a code point can reach back across the tail cut.
const margin = utf8.UTFMax - 1

// TextRetainer bounds a byte stream. It is an [io.Writer]: Write may be
// called any number of times with arbitrary chunk boundaries (a UTF-8 code
// point may be split across writes), and the result does not depend on
// them. It keeps at most the budget given to [NewTextRetainer] (plus a few
// bytes to place the cuts), however much is written.
//
// The zero TextRetainer keeps nothing and counts everything written.
type TextRetainer struct {
	headCap int // budget of the head
	tailCap int // budget of the tail
	ringCap int // tailCap + margin, or 0 when tailCap is 0

	head    []byte // the first min(total, headCap) bytes
	next    byte   // the byte right after the head, once total > headCap
	ring    []byte // the last min(total-headCap, ringCap) bytes after the head
	rpos    int    // once len(ring) == ringCap: index of the oldest byte; else 0
	total   int64  // bytes written
	lines   int64  // '\n' in the bytes written
	noLines bool   // WithoutLineCount: lines is not kept
	last    byte   // the last byte written
}

// TextOption changes how a [TextRetainer] works.
type TextOption func(*TextRetainer)

// WithoutLineCount makes a retainer skip counting lines: its results
// report Omitted.Lines as 0 (so notices speak of bytes only). It saves a
// scan of every byte written, for streams whose readers never show lines.
func WithoutLineCount() TextOption { return func(r *TextRetainer) { r.noLines = true } }

// NewTextRetainer returns a retainer that keeps at most maxBytes bytes of
// what is written to it: the first maxBytes for [Head], the last maxBytes
// for [Tail]; [HeadTail] keeps the first maxBytes/2 and the last
// maxBytes-maxBytes/2 (so with maxBytes 1 only a tail). A cut that would
// split a UTF-8 code point moves to keep less, never more. maxBytes <= 0
// keeps nothing: everything written is omitted. It panics if strategy is
// not one of the three.
func NewTextRetainer(strategy Strategy, maxBytes int, opts ...TextOption) *TextRetainer {
	if !strategy.valid() {
		panic(fmt.Sprintf("retention: NewTextRetainer with invalid %v", strategy))
	}
	r := &TextRetainer{}
	for _, o := range opts {
		o(r)
	}
	if maxBytes <= 0 {
		return r
	}
	switch strategy {
	case Head:
		r.headCap = maxBytes
	case Tail:
		r.tailCap = maxBytes
	case HeadTail:
		r.headCap = maxBytes / 2
		r.tailCap = maxBytes - r.headCap
	}
	if r.tailCap > 0 {
		r.tailCap = min(r.tailCap, math.MaxInt-margin) // room for the margin
		r.ringCap = r.tailCap + margin
	}
	return r
}

// Write records p. It never fails: it returns len(p), nil.
func (r *TextRetainer) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	if !r.noLines {
		r.lines += int64(bytes.Count(p, []byte{'\n'}))
	}
	r.last = p[n-1]
	if len(r.head) < r.headCap {
		k := min(r.headCap-len(r.head), len(p))
		r.head = appendBounded(r.head, p[:k], r.headCap)
		p = p[k:]
	}
	if len(p) > 0 && r.total+int64(n-len(p)) == int64(r.headCap) {
		r.next = p[0]
	}
	if r.ringCap > 0 && len(p) > 0 {
		r.ringWrite(p)
	}
	r.total += int64(n)
	return n, nil
}

// ringWrite appends p to the ring, dropping its oldest bytes when full.
func (r *TextRetainer) ringWrite(p []byte) {
	if len(p) >= r.ringCap {
		p = p[len(p)-r.ringCap:]
		if cap(r.ring) < r.ringCap {
			r.ring = make([]byte, r.ringCap)
		}
		r.ring = r.ring[:r.ringCap]
		copy(r.ring, p)
		r.rpos = 0
		return
	}
	if len(r.ring) < r.ringCap {
		k := min(r.ringCap-len(r.ring), len(p))
		r.ring = appendBounded(r.ring, p[:k], r.ringCap)
		p = p[k:]
	}
	// The ring is full (or p is used up): overwrite the oldest bytes. p is
	// shorter than the ring, so it wraps at most once.
	k := copy(r.ring[r.rpos:], p)
	if k < len(p) {
		r.rpos = copy(r.ring, p[k:])
	} else if r.rpos += k; r.rpos == r.ringCap {
		r.rpos = 0
	}
}

// appendBounded appends src to dst, growing dst to at most limit bytes of
// capacity (len(dst)+len(src) must not exceed limit).
func appendBounded(dst, src []byte, limit int) []byte {
	if need := len(dst) + len(src); need > cap(dst) {
		c := min(max(2*cap(dst), need, 256), limit)
		grown := make([]byte, len(dst), c)
		copy(grown, dst)
		dst = grown
	}
	return append(dst, src...)
}

// ringStart is the stream position of the oldest byte in the ring.
func (r *TextRetainer) ringStart() int64 { return r.total - int64(len(r.ring)) }

// at returns the byte at stream position pos, which must be kept: in the
// head, or in the ring.
func (r *TextRetainer) at(pos int64) byte {
	if pos < int64(len(r.head)) {
		return r.head[pos]
	}
	i := int(pos - r.ringStart())
	if len(r.ring) == r.ringCap {
		i = (r.rpos + i) % r.ringCap
	}
	return r.ring[i]
}

// span returns the bytes at stream positions [from, to), all kept.
func (r *TextRetainer) span(from, to int64, buf []byte) []byte {
	buf = buf[:0]
	for pos := from; pos < to; pos++ {
		buf = append(buf, r.at(pos))
	}
	return buf
}

// ringString returns the ring's bytes from stream position from on.
func (r *TextRetainer) ringString(from int64) string {
	skip := int(from - r.ringStart())
	older, newer := r.ring, []byte(nil)
	if len(r.ring) == r.ringCap {
		older, newer = r.ring[r.rpos:], r.ring[:r.rpos]
	}
	if skip >= len(older) {
		return string(newer[skip-len(older):])
	}
	var b strings.Builder
	b.Grow(len(older) - skip + len(newer))
	b.Write(older[skip:])
	b.Write(newer)
	return b.String()
}

// Total returns the number of bytes written so far.
func (r *TextRetainer) Total() int64 { return r.total }

// Result returns what is kept of the bytes written so far and what was
// omitted. It may be called at any time, any number of times: it does not
// consume or change what was written.
//
// When nothing had to be dropped the whole text is in Head, whatever the
// strategy. Otherwise Head holds the kept beginning (Head, HeadTail) and
// Tail the kept end (Tail, HeadTail), each cut moved, if needed, so that it
// does not split a UTF-8 code point; the bytes a move gives up count as
// omitted, so len(Head)+len(Tail)+Omitted.Bytes == Total always.
//
// A cut splits a code point when the bytes before it are the lead byte and
// some (not all) continuation bytes of a valid UTF-8 encoding and the byte
// after it validly continues that encoding. The head cut then moves back to
// the lead byte; the tail cut moves forward past the continuation bytes that
// follow it. Bytes that are not valid UTF-8 in the input itself are kept or
// dropped like any other and never repaired: so valid UTF-8 in gives valid
// UTF-8 Head and Tail, and invalid input comes out byte for byte as it was.
// (A multi-byte sequence cut off by the end of the input so far counts as
// split, as the next write may complete it.)
func (r *TextRetainer) Result() TextResult {
	res := TextResult{Total: r.total}
	if r.total <= int64(r.headCap)+int64(r.tailCap) {
		res.Head = string(r.head)
		if len(r.ring) > 0 {
			res.Head += r.ringString(r.ringStart())
		}
		return res
	}
	var buf [2 * margin]byte

	// The head cut, moved back over a code point it splits.
	hEnd := r.headCap
	if hEnd > 0 {
		back, _ := straddle(r.head[max(0, hEnd-margin):hEnd], []byte{r.next})
		hEnd -= back
	}

	// The tail cut, moved forward over a code point it splits.
	tStart := r.total - int64(r.tailCap)
	if r.tailCap > 0 {
		before := r.span(max(0, tStart-margin), tStart, buf[:0:margin])
		after := r.span(tStart, min(tStart+margin, r.total), buf[margin:margin])
		_, fwd := straddle(before, after)
		tStart += int64(fwd)
		if tStart < r.total {
			res.Tail = r.ringString(tStart)
		}
	}
	res.Head = string(r.head[:hEnd])

	// The dropped bytes are [hEnd, tStart), never empty here.
	lastDropped := r.last
	if tStart < r.total {
		lastDropped = r.at(tStart - 1)
	}
	res.Omitted.Bytes = tStart - int64(hEnd)
	if r.noLines {
		return res
	}
	res.Omitted.Lines = r.lines -
		int64(strings.Count(res.Head, "\n")) -
		int64(strings.Count(res.Tail, "\n"))
	if lastDropped != '\n' {
		res.Omitted.Lines++
	}
	return res
}

// TextResult is what a [TextRetainer] kept and what it omitted.
type TextResult struct {
	// Head is the kept beginning of the text, or the whole text when
	// nothing was omitted.
	Head string
	// Tail is the kept end of the text; empty when nothing was omitted.
	Tail    string
	Omitted Omitted
	// Total is the number of bytes written:
	// len(Head)+len(Tail)+Omitted.Bytes.
	Total int64
}

// Truncated reports whether anything was omitted.
func (t TextResult) Truncated() bool { return t.Omitted.Any() }

// String renders the result for a reader. When nothing was omitted it is
// Head+Tail, the text unchanged. Otherwise the notice of [FormatNotice]
// stands on a line of its own where the omitted bytes were: Head, then a
// '\n' if Head is not empty and does not already end with one, then the
// notice, then, if Tail is not empty, '\n' and Tail. So a Head result reads
// "kept\n[… omitted]", a Tail result "[… omitted]\nkept" and a HeadTail
// result "head\n[… omitted]\ntail".
func (t TextResult) String() string {
	if !t.Truncated() {
		return t.Head + t.Tail
	}
	notice := FormatNotice(t.Omitted)
	var b strings.Builder
	b.Grow(len(t.Head) + len(notice) + len(t.Tail) + 2)
	b.WriteString(t.Head)
	if t.Head != "" && !strings.HasSuffix(t.Head, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(notice)
	if t.Tail != "" {
		b.WriteByte('\n')
		b.WriteString(t.Tail)
	}
	return b.String()
}
