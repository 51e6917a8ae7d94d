package termsessions

import (
	"bytes"
	"strings"
	"testing"
)

// A capture finds its markers wherever the reads split them, and keeps
// the head and tail of what lies between.
func TestCaptureSplits(t *testing.T) {
	stream := "echo-of-the-typed-line\r\nSTART-1\r\nline one\r\nline two\r\nEND-1:7\r\n$ "
	for split := 1; split < len(stream); split++ {
		c := newCapture(Capture{From: "START-1", Until: "END-1:", MaxBytes: 1 << 10})
		c.feed([]byte(stream[:split]))
		c.feed([]byte(stream[split:]))
		r := c.result()
		if !r.Started || !r.Ended || string(r.Data) != "line one\r\nline two\r\n" || r.Rest != "7" || r.Omitted != 0 {
			t.Fatalf("split at %d: %+v (data %q)", split, r, r.Data)
		}
	}
	// The until's line has not ended: not yet.
	c := newCapture(Capture{From: "S", Until: "E:", MaxBytes: 100})
	c.feed([]byte("S\nout\nE:12"))
	if c.ended {
		t.Fatal("ended before the marker's line did")
	}
	c.feed([]byte("3\r\n"))
	if r := c.result(); !r.Ended || r.Rest != "123" || string(r.Data) != "out\n" {
		t.Fatalf("%+v", r)
	}
}

// Output over the bound keeps its first and last halves, with the rest
// counted, and still finds the end marker.
func TestCaptureBound(t *testing.T) {
	c := newCapture(Capture{From: "S", Until: "END:", MaxBytes: 1000})
	c.feed([]byte("S\n"))
	var all bytes.Buffer
	for i := range 20000 {
		line := []byte(strings.Repeat(string(rune('a'+i%26)), 99) + "\n")
		all.Write(line)
		c.feed(line)
	}
	c.feed([]byte("EN"))
	c.feed([]byte("D:0\n"))
	r := c.result()
	want := all.Bytes()
	if !r.Ended || r.Rest != "0" || len(r.Data) != 1000 || r.Omitted != int64(len(want)-1000) {
		t.Fatalf("ended %v rest %q: %d bytes kept, %d omitted", r.Ended, r.Rest, len(r.Data), r.Omitted)
	}
	if !bytes.Equal(r.Data[:500], want[:500]) || !bytes.Equal(r.Data[500:], want[len(want)-500:]) {
		t.Fatalf("kept %q ... %q", r.Data[:40], r.Data[len(r.Data)-40:])
	}
	// A from that never comes: the end of what was printed, counted.
	c = newCapture(Capture{From: "S", Until: "E", MaxBytes: 10})
	c.feed(bytes.Repeat([]byte("x"), 300<<10))
	c.feed([]byte(">>> "))
	if r := c.result(); r.Started || string(r.Data) != "xxxxxx>>> " || r.Omitted != 300<<10-6 {
		t.Fatalf("not started: %+v", r)
	}
}

// A run's latest line is the command's: nothing of the typed line before
// the start marker, and not the end marker, whole or arriving.
func TestCaptureLastLine(t *testing.T) {
	c := newCapture(Capture{From: "START-1", Until: "END-1:", MaxBytes: 1 << 10})
	for _, step := range []struct{ feed, want string }{
		{"typed line echo", ""},
		{"\r\nSTART-1\r\n", ""},
		{"one\r\ntw", "tw"},
		{"o\r\n\r\n", "two"},
		{"EN", "two"},
		{"D-1:0", "two"},
	} {
		c.feed([]byte(step.feed))
		if got := string(c.lastLine()); got != step.want {
			t.Fatalf("after %q: %q, want %q", step.feed, got, step.want)
		}
	}
}
