//go:build unix

package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/plugins/shellenv"
)

func viewOf(h *Host, id string) (EntryView, bool) {
	for _, v := range h.Graph() {
		if v.ID == id {
			return v, true
		}
	}
	return EntryView{}, false
}

// The graph says of each entry what status says, with the binary's sha256,
// what it consumes and where the file has it; a crash is signalled, shows
// as its last error at the entry's line, and the restart is signalled too.
func TestGraphAndChanges(t *testing.T) {
	h := startHost(t, writeComp(t, pairYAML))
	changes, stop := h.Changes()
	defer stop()

	probe, ok := viewOf(h, "probe")
	if !ok {
		t.Fatalf("no probe in %+v", h.Graph())
	}
	data, err := os.ReadFile(probe.Binary)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if probe.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("sha256 %q, want the binary's %x", probe.SHA256, sum)
	}
	if probe.File != h.Composition().File || probe.Line != 3 || probe.State != "active" || probe.Pid == 0 || probe.LastError != nil {
		t.Fatalf("probe %+v", probe)
	}
	want := []Dep{{Key: shellenv.Key}, {Key: "nobody", Optional: true}}
	if len(probe.Consumes) != 2 || probe.Consumes[0] != want[0] || probe.Consumes[1] != want[1] {
		t.Fatalf("consumes %+v, want %+v", probe.Consumes, want)
	}
	b, err := json.Marshal(probe)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":"probe"`, `"sha256":"` + probe.SHA256 + `"`, `"state":"active"`, `"consumes":[{"key":"` + shellenv.Key + `","optional":false},{"key":"nobody","optional":true}]`, `"line":3`, `"lastError":null`, `"uptimeMs":`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
	if env, _ := viewOf(h, "env"); env.Line != 7 || len(env.Provides) != 1 || env.Provides[0] != shellenv.Key || len(env.Consumes) != 0 {
		t.Fatalf("env %+v", env)
	}

	for len(changes) > 0 {
		<-changes
	}
	old := probe.Pid
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Woken by the crash and again by the restart; each time the graph
	// is read anew.
	deadline := time.After(30 * time.Second)
	var v EntryView
	for v.Pid == 0 || v.Pid == old || v.State != "active" {
		select {
		case <-changes:
		case <-deadline:
			t.Fatalf("no restart signalled; probe now %+v", v)
		}
		v, _ = viewOf(h, "probe")
	}
	if v.Restarts != 1 || v.LastError == nil || v.LastError.Line != 3 || v.LastError.File != probe.File ||
		!strings.Contains(v.LastError.Message, "exited unexpectedly") {
		t.Fatalf("after the crash: %+v (last error %+v)", v, v.LastError)
	}
}

// The host's lines and its plugins' go to the ring it was given, the
// plugins' under their entry ids.
func TestLogRingThroughHost(t *testing.T) {
	ring := hostlog.NewRing(0)
	opts := testOptions(t, nil)
	opts.Logger = ring.Host(hclog.New(&hclog.LoggerOptions{Name: "dsh", Level: hclog.Debug, Output: testWriter{t}}))
	opts.PluginLogger = ring.Plugins(hclog.New(&hclog.LoggerOptions{Name: "dsh", Level: hclog.Debug, Output: testWriter{t}}))
	opts.LogRing = ring
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, pairYAML), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	if h.LogRing() != ring {
		t.Fatal("the host does not hand its ring on")
	}
	host := ring.Recent("", "debug", 0)
	if !slices.ContainsFunc(host, func(l hostlog.Line) bool { return l.Message == "plugin ready" && l.Fields["entry"] == "probe" }) {
		t.Fatalf("no host line saying probe is ready: %+v", host)
	}
	for _, id := range []string{"probe", "env"} {
		if lines := ring.Recent(id, "", 0); len(lines) == 0 {
			t.Errorf("no line of %s: %+v", id, ring.Recent(hostlog.AllEntries, "", 0))
		}
	}
}
