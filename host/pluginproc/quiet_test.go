package pluginproc

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// go-plugin's word on an exit is kept for the host's own line and logged
// at debug only: a stop the host made is no error, and a crash is said
// by the host.
func TestQuietStops(t *testing.T) {
	var buf bytes.Buffer
	note := &exitNote{said: make(chan struct{})}
	p := &Process{exitNote: note}
	l := quietStops{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info}), note: note}
	if got := p.ExitReason(time.Millisecond); got != "" {
		t.Fatalf("an exit not yet reaped has a reason: %q", got)
	}
	l.Error("plugin process exited", "plugin", "/bin/x", "id", 1, "error", "signal: killed")
	if buf.Len() != 0 {
		t.Fatalf("go-plugin's exit line was logged at info or above: %s", buf.String())
	}
	if got := p.ExitReason(time.Millisecond); got != "signal: killed" {
		t.Fatalf("exit reason %q, want signal: killed", got)
	}
	l.Error("error closing client", "error", "x")
	if !strings.Contains(buf.String(), "[ERROR] error closing client") {
		t.Fatalf("another error: %q", buf.String())
	}
}

// A plugin's line relayed by go-plugin comes under the entry's name, with
// one time stamp and its keys sorted (go-plugin hands them over in a
// map's order).
func TestRelayedLines(t *testing.T) {
	var buf bytes.Buffer
	base := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info, Name: "dsh.tools"})
	l := quietStops{Logger: base, binary: "dsh-tool-bash"}.Named("dsh-tool-bash")
	l.Info("command finished", "workdir", "/w", "@module", "tool-bash", "exit", "0", "timestamp", "2026-12-02T06:48:55.777Z", "command", "true")
	got := buf.String()
	want := `[INFO]  dsh.tools: command finished: command=true exit=0 workdir=/w` + "\n"
	if !strings.HasSuffix(got, want) {
		t.Fatalf("relayed line %q, want it to end %q", got, want)
	}
	if strings.Contains(got, "timestamp=") || strings.Contains(got, "@module") {
		t.Fatalf("relayed line keeps go-plugin's keys: %q", got)
	}
}
