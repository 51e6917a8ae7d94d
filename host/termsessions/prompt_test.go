//go:build linux

package termsessions

import "testing"

func TestAtPrompt(t *testing.T) {
	p := []byte(prompt)
	for _, c := range []struct {
		out  string
		want bool
	}{
		{prompt, true},
		{"out\r\n\x1b[?2004h" + prompt, true},
		{prompt + "\x1b[K", true},
		{prompt + "\x1b[?2004h\x1b]0;title\x07", true},
		{prompt + "ls", false},
		{prompt + "ls\r\nfile\r\n", false},
		{prompt + "\x1b[", false},
		{prompt + "\x1b[6n\x1b[?1h\x1b=", true},
		{prompt + "\x1b(B\x1b7", true},
		{prompt + "\x1b(", false},
		{prompt + "\x1b\x01", false},
		{prompt + "\x1bPq\x1b\\", false},
		{"$ ", false},
		{"", false},
	} {
		if got := AtPrompt([]byte(c.out), p); got != c.want {
			t.Errorf("AtPrompt(%q) = %v", c.out, got)
		}
	}
	if AtPrompt([]byte(prompt), nil) {
		t.Error("a dialect without a prompt is at it")
	}
}
