package hostlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Host lines are the host's (entry ""), a plugin logger's lines are its
// entry's, whatever names go-plugin adds below; lines the logger's level
// drops are not kept; the output is written as before.
func TestRingKeepsWhatIsLogged(t *testing.T) {
	r := NewRing(100)
	var out bytes.Buffer
	opts := hclog.LoggerOptions{Name: "dsh", Output: &out, Level: hclog.Info}
	host := r.Host(New(&opts))
	plugins := r.Plugins(New(&opts))

	host.Named("jobs").With("owner", "cli").Info("job finished", "job", "j1", "exit", 0)
	host.Debug("below the level")
	plugins.Named("tools").Named("dsh-tool-bash").Warn("slow", "ms", 1500*time.Millisecond)
	plugins.Named("env").Error("broken", "error", fmt.Errorf("no such file"))

	all := r.Recent(AllEntries, "", 0)
	if len(all) != 3 {
		t.Fatalf("kept %d lines, want 3: %+v", len(all), all)
	}
	if l := all[0]; l.Entry != "" || l.Level != "info" || l.Message != "job finished" || l.Fields["owner"] != "cli" || l.Fields["job"] != "j1" || l.Fields["exit"] != "0" {
		t.Fatalf("host line %+v", l)
	}
	if l := all[1]; l.Entry != "tools" || l.Level != "warn" || l.Fields["ms"] != "1.5s" {
		t.Fatalf("plugin line %+v", l)
	}
	if l := all[2]; l.Entry != "env" || l.Fields["error"] != "no such file" {
		t.Fatalf("plugin line %+v", l)
	}
	if got := r.Recent("", "", 0); len(got) != 1 || got[0].Message != "job finished" {
		t.Fatalf("host's own lines: %+v", got)
	}
	if got := r.Recent("tools", "", 0); len(got) != 1 || got[0].Message != "slow" {
		t.Fatalf("tools' lines: %+v", got)
	}
	if got := r.Recent(AllEntries, "warn", 0); len(got) != 2 || got[0].Message != "slow" || got[1].Message != "broken" {
		t.Fatalf("warn and above: %+v", got)
	}
	if got := r.Recent(AllEntries, "", 1); len(got) != 1 || got[0].Message != "broken" {
		t.Fatalf("newest one: %+v", got)
	}
	b, err := json.Marshal(Line{Time: time.Unix(0, 0).UTC(), Level: "info", Message: "m"})
	if err != nil || string(b) != `{"time":"1970-01-01T00:00:00Z","level":"info","entry":"","message":"m","fields":{}}` {
		t.Fatalf("JSON %s %v", b, err)
	}
	if !strings.Contains(out.String(), "dsh.jobs: job finished: owner=cli job=j1 exit=0") || strings.Contains(out.String(), "below the level") {
		t.Fatalf("output changed:\n%s", out.String())
	}
}

// The ring holds its size, newest last, once it has gone round.
func TestRingBounded(t *testing.T) {
	r := NewRing(10)
	l := r.Host(New(&hclog.LoggerOptions{Output: &bytes.Buffer{}, Level: hclog.Info}))
	for i := range 25 {
		l.Info(fmt.Sprintf("line %d", i))
	}
	got := r.Recent(AllEntries, "", 0)
	if len(got) != 10 || got[0].Message != "line 15" || got[9].Message != "line 24" {
		t.Fatalf("kept %d: first %q last %q", len(got), got[0].Message, got[len(got)-1].Message)
	}
	if got := r.Recent(AllEntries, "", 3); len(got) != 3 || got[0].Message != "line 22" || got[2].Message != "line 24" {
		t.Fatalf("newest three: %+v", got)
	}
}

// A subscriber sees each line as logged; one that does not read loses
// lines but never holds the logger up; after stop it gets nothing.
func TestRingSubscribers(t *testing.T) {
	r := NewRing(10)
	l := r.Plugins(New(&hclog.LoggerOptions{Output: &bytes.Buffer{}, Level: hclog.Trace})).Named("probe")
	lines, stop := r.Subscribe()
	_, stall := r.Subscribe() // never read
	defer stall()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 * subBuffer {
			l.Trace("tick", "i", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("logging blocked on a subscriber that does not read")
	}
	first := <-lines
	if first.Entry != "probe" || first.Level != "trace" || first.Fields["i"] != "0" {
		t.Fatalf("first line %+v", first)
	}
	stop()
	for len(lines) > 0 {
		<-lines
	}
	l.Info("after stop")
	select {
	case got := <-lines:
		t.Fatalf("line after stop: %+v", got)
	case <-time.After(50 * time.Millisecond):
	}
}
