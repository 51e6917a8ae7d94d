package hostlog

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Who and what come first in Lead's order, the rest as given; empty values
// go, durations read as durations, in text and in JSON.
func TestLineShape(t *testing.T) {
	var buf bytes.Buffer
	l := New(&hclog.LoggerOptions{Name: "dsh", Output: &buf, Level: hclog.Info}).Named("jobs").With("entry", "tools")
	l.Info("job finished", "exit", "0", "command", "sleep 1", "reason", "", "duration", 1500*time.Millisecond, "owner", "cli", "job", "j1", "err", nil)
	want := `[INFO]  dsh.jobs: job finished: entry=tools owner=cli job=j1 command="sleep 1" exit=0 duration=1.5s` + "\n"
	if got := buf.String(); !strings.HasSuffix(got, want) {
		t.Fatalf("got  %q\nwant it to end %q", got, want)
	}

	buf.Reset()
	j := New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true})
	j.Info("x", "duration", 2*time.Second, "workdir", "")
	if got := buf.String(); !strings.Contains(got, `"duration":"2s"`) || strings.Contains(got, "workdir") {
		t.Fatalf("JSON line %s", got)
	}
}

func TestTidyOddArgs(t *testing.T) {
	got := Tidy([]any{"a", 1, "owner", "o", "dangling"})
	want := []any{"owner", "o", "a", 1, "dangling"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
