package retention

import (
	"fmt"
	"strconv"
	"strings"
)

// Strategy says which part of a stream to keep.
type Strategy int

const (
	// Head keeps the beginning of the stream and drops the rest.
	Head Strategy = iota
	// Tail keeps the end of the stream and drops the beginning.
	Tail
	// HeadTail keeps the beginning and the end and drops the middle.
	HeadTail
)

// String returns "head", "tail" or "headTail", the names [ParseStrategy]
// accepts, and "Strategy(N)" for any other value.
func (s Strategy) String() string {
	switch s {
	case Head:
		return "head"
	case Tail:
		return "tail"
	case HeadTail:
		return "headTail"
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

func (s Strategy) valid() bool { return s == Head || s == Tail || s == HeadTail }

// ParseStrategy returns the Strategy named s: "head", "tail" or "headTail",
// compared without regard to case.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range []Strategy{Head, Tail, HeadTail} {
		if strings.EqualFold(s, st.String()) {
			return st, nil
		}
	}
	return 0, fmt.Errorf("retention: unknown strategy %q (want head, tail or headTail)", s)
}
