package retention

import (
	"bytes"
	"unicode/utf8"
)

// retain writes input to a new retainer in chunks of chunk bytes (all at
// once when chunk <= 0) and returns its result.
func retain(s Strategy, maxBytes int, input string, chunk int) TextResult {
	r := NewTextRetainer(s, maxBytes)
	writeChunked(r, []byte(input), chunk)
	return r.Result()
}

func writeChunked(r *TextRetainer, p []byte, chunk int) {
	if chunk <= 0 {
		chunk = len(p)
	}
	for len(p) > 0 {
		k := min(chunk, len(p))
		if n, err := r.Write(p[:k]); n != k || err != nil {
			panic("short write")
		}
		p = p[k:]
	}
}

// budgets is how a strategy splits maxBytes, restated for the tests.
func budgets(s Strategy, maxBytes int) (headCap, tailCap int) {
	if maxBytes <= 0 {
		return 0, 0
	}
	switch s {
	case Head:
		return maxBytes, 0
	case Tail:
		return 0, maxBytes
	}
	return maxBytes / 2, maxBytes - maxBytes/2
}

// oracle computes the documented result from the whole input at once, in
// the plainest way: it is the reference the streaming retainer must match.
func oracle(s Strategy, maxBytes int, input []byte) TextResult {
	total := len(input)
	headCap, tailCap := budgets(s, maxBytes)
	res := TextResult{Total: int64(total)}
	if total <= headCap+tailCap {
		res.Head = string(input)
		return res
	}
	hEnd := headCap
	if lead, end, ok := oracleCodePoint(input, hEnd); ok && lead < hEnd && hEnd < end {
		hEnd = lead
	}
	tStart := total - tailCap
	if tailCap > 0 {
		if lead, end, ok := oracleCodePoint(input, tStart); ok && lead < tStart && tStart < end {
			tStart = end
		}
	}
	res.Head = string(input[:hEnd])
	res.Tail = string(input[tStart:])
	dropped := input[hEnd:tStart]
	res.Omitted.Bytes = int64(len(dropped))
	res.Omitted.Lines = int64(bytes.Count(dropped, []byte{'\n'}))
	if len(dropped) > 0 && dropped[len(dropped)-1] != '\n' {
		res.Omitted.Lines++
	}
	return res
}

// oracleCodePoint finds the sequence that may straddle position cut: it
// starts at the nearest byte before cut that is not a continuation byte (at
// most 3 back) and ends after its longest validly encoded beginning.
func oracleCodePoint(input []byte, cut int) (lead, end int, ok bool) {
	for lead = cut - 1; lead >= 0 && lead >= cut-3; lead-- {
		if !utf8.RuneStart(input[lead]) {
			continue
		}
		end = lead
		for end < len(input) && end-lead < utf8.UTFMax && oracleValidPrefix(input[lead:end+1]) {
			end++
		}
		return lead, end, true
	}
	return 0, 0, false
}

// oracleValidPrefix reports whether b begins (or is) the encoding of a
// multi-byte code point, by completing it with continuation bytes and asking
// the standard library to decode it.
func oracleValidPrefix(b []byte) bool {
	for n := 2; n <= utf8.UTFMax; n++ {
		if len(b) > n {
			continue
		}
		for _, pad := range []byte{0x80, 0xBF} {
			full := append(append([]byte(nil), b...), bytes.Repeat([]byte{pad}, n-len(b))...)
			if _, size := utf8.DecodeRune(full); size == n {
				return true
			}
		}
	}
	return false
}
