package retention

import "testing"

func TestStrategy(t *testing.T) {
	for s, name := range map[Strategy]string{Head: "head", Tail: "tail", HeadTail: "headTail", Strategy(7): "Strategy(7)", Strategy(-1): "Strategy(-1)"} {
		if got := s.String(); got != name {
			t.Errorf("%d.String() = %q, want %q", int(s), got, name)
		}
	}
	for in, want := range map[string]Strategy{"head": Head, "tail": Tail, "headTail": HeadTail, "HEAD": Head, "headtail": HeadTail, "Tail": Tail} {
		got, err := ParseStrategy(in)
		if err != nil || got != want {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "head-tail", "head_tail", " head", "middle", "Strategy(7)", "0"} {
		if got, err := ParseStrategy(in); err == nil {
			t.Errorf("ParseStrategy(%q) = %v, want an error", in, got)
		}
	}
}
