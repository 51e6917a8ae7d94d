package retention

import (
	"strconv"
	"strings"
)

// Omitted is an exact account of what a retainer dropped.
//
// Values made by this package never hold negative counts; [Omitted.Any] and
// [FormatNotice] ignore counts that are not positive.
type Omitted struct {
	// Bytes is the number of bytes a [TextRetainer] dropped.
	Bytes int64
	// Items is the number of items an [ItemRetainer] dropped.
	Items int64
	// Lines is the number of lines a [TextRetainer] dropped wholly or in
	// part. A line is a maximal run of bytes that ends with '\n' or at the
	// end of the input (the input written so far, while writing goes on),
	// and it counts when at least one of its bytes, its '\n' included, was
	// dropped. The dropped bytes always form one contiguous region (the
	// end for Head, the beginning for Tail, the middle for HeadTail), so
	// Lines is the number of '\n' in that region plus one if the region's
	// last byte is not '\n'; it is 0 exactly when Bytes is 0 (or when the
	// retainer was made [WithoutLineCount], which never counts lines).
	//
	// For example, of "one\ntwo\nthree\n" a Head retainer keeping "one\ntw"
	// drops "o\nthree\n": 2 lines ("two\n" in part, "three\n" whole).
	Lines int64
}

// Any reports whether anything was omitted.
func (o Omitted) Any() bool { return o.Bytes > 0 || o.Items > 0 || o.Lines > 0 }

// FormatNotice returns the standard one-line notice of a truncation, or ""
// when nothing was omitted:
//
//	[1,234 bytes (56 lines) omitted]
//	[1 byte (1 line) omitted]
//	[12 items omitted]
//
// Counts have thousands separators and their unit words agree with them. A
// count that is not positive is left out ("[3 bytes omitted]" for Lines 0,
// "[3 lines omitted]" for Bytes 0), and Omitted values that count both bytes
// and items (which no retainer makes) read "[10 bytes (1 line), 2 items
// omitted]". Tools put their own recovery words ("full output: <file>")
// around the notice.
func FormatNotice(o Omitted) string {
	var parts []string
	switch {
	case o.Bytes > 0 && o.Lines > 0:
		parts = append(parts, count(o.Bytes, "byte")+" ("+count(o.Lines, "line")+")")
	case o.Bytes > 0:
		parts = append(parts, count(o.Bytes, "byte"))
	case o.Lines > 0:
		parts = append(parts, count(o.Lines, "line"))
	}
	if o.Items > 0 {
		parts = append(parts, count(o.Items, "item"))
	}
	if len(parts) == 0 {
		return ""
	}
	return "[" + strings.Join(parts, ", ") + " omitted]"
}

// count renders n with thousands separators and the unit word, plural
// unless n is 1.
func count(n int64, unit string) string {
	s := thousands(n) + " " + unit
	if n != 1 {
		s += "s"
	}
	return s
}

// thousands renders n in decimal with a comma between groups of three
// digits.
func thousands(n int64) string {
	digits := strconv.FormatInt(n, 10)
	sign := ""
	if digits[0] == '-' {
		sign, digits = "-", digits[1:]
	}
	if len(digits) <= 3 {
		return sign + digits
	}
	var b strings.Builder
	b.Grow(len(sign) + len(digits) + len(digits)/3)
	b.WriteString(sign)
	first := len(digits) % 3
	if first == 0 {
		first = 3
	}
	b.WriteString(digits[:first])
	for i := first; i < len(digits); i += 3 {
		b.WriteByte(',')
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}
