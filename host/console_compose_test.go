//go:build unix

package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// composeHost runs pairYAML from a file of mode 0640 with the watcher
// polling it; its reports come on the channel.
func composeHost(t *testing.T) (*Host, string, chan error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "comp.yaml")
	h := startFile(t, file, pairYAML)
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	// The chmod is no edit: the stamp is mtime and size.
	reports := make(chan error, 10)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { h.Watch(ctx, 20*time.Millisecond, os.LookupEnv, func(_ string, err error) { reports <- err }) })
	t.Cleanup(func() { stop(); wg.Wait() })
	return h, file, reports
}

func checkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noReport fails if the watcher applies anything within a few of its
// intervals.
func noReport(t *testing.T, reports chan error) {
	t.Helper()
	select {
	case err := <-reports:
		t.Fatalf("the watcher applied the file again: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
}

func assertFile(t *testing.T, file, want string) {
	t.Helper()
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("file now:\n%s\nwant:\n%s", got, want)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v (%v), want 0640", fi.Mode(), err)
	}
}

// A bad key and an unknown binary are each reported at their line and
// column; checking changes nothing.
func TestCheckCompositionText(t *testing.T) {
	h, file, reports := composeHost(t)
	ctx := checkCtx(t)
	got, text, err := h.CompositionText()
	if err != nil || got != h.Composition().File || string(text) != pairYAML {
		t.Fatalf("CompositionText: %q %q %v", got, text, err)
	}
	if p := h.CheckCompositionText(ctx, []byte(pairYAML)); len(p) != 0 {
		t.Fatalf("the running text has problems: %+v", p)
	}

	badKey := strings.Replace(pairYAML, "    name: probe\n", "    name: probe\n    bogus: 1\n", 1)
	p := h.CheckCompositionText(ctx, []byte(badKey))
	if len(p) != 1 || p[0].Line != 5 || p[0].Col != 5 || p[0].File != h.Composition().File || !strings.Contains(p[0].Message, `unknown key "bogus"`) ||
		strings.HasPrefix(p[0].Message, file) {
		t.Fatalf("bad key: %+v", p)
	}

	unknown := pairYAML + "  - id: ghost\n    name: no-such-plugin\n"
	p = h.CheckCompositionText(ctx, []byte(unknown))
	if len(p) != 1 || p[0].Line != 12 || !strings.Contains(p[0].Message, `"dsh-no-such-plugin" not found`) {
		t.Fatalf("unknown binary: %+v", p)
	}
	// A config the plugin's schema refuses, in a new entry: the plugin
	// is started to say so, and stopped.
	badConfig := pairYAML + "  - id: policy-bad\n    name: probe\n    config: {fact: 7}\n"
	if p = h.CheckCompositionText(ctx, []byte(badConfig)); len(p) != 1 || p[0].Line != 14 || !strings.Contains(p[0].Message, "want string") {
		t.Fatalf("bad config: %+v", p)
	}
	assertFile(t, file, pairYAML)
	if _, ok := viewOf(h, "ghost"); ok {
		t.Fatal("a checked text was applied")
	}
	noReport(t, reports)
}

// A good edit is written and applied (an entry added, then removed), and
// the watcher does not apply it again; a broken edit (refused by the
// check, or by the plugin when applied) leaves the file and the running
// set as they were.
func TestApplyCompositionText(t *testing.T) {
	h, file, reports := composeHost(t)
	ctx := checkCtx(t)
	probePid, envPid := pidOf(h, "probe"), pidOf(h, "env")

	added := pairYAML + "  - id: policy-extra\n    name: probe\n"
	p, err := h.ApplyCompositionText(ctx, []byte(added))
	if err != nil || len(p) != 0 {
		t.Fatalf("apply: %+v %v", p, err)
	}
	assertFile(t, file, added)
	v, ok := viewOf(h, "policy-extra")
	if !ok || v.State != "active" || v.Pid == 0 || v.Line != 12 {
		t.Fatalf("added entry %+v", v)
	}
	if pidOf(h, "probe") != probePid || pidOf(h, "env") != envPid {
		t.Fatal("adding an entry restarted the others")
	}
	noReport(t, reports)

	p, err = h.ApplyCompositionText(ctx, []byte(pairYAML))
	if err != nil || len(p) != 0 {
		t.Fatalf("apply: %+v %v", p, err)
	}
	assertFile(t, file, pairYAML)
	if _, ok := viewOf(h, "policy-extra"); ok || testplugins.Alive(v.Pid) {
		t.Fatalf("added entry still there (pid %d alive: %v)", v.Pid, testplugins.Alive(v.Pid))
	}
	noReport(t, reports)

	// Refused by the check: nothing written.
	broken := strings.Replace(pairYAML, "    name: shell-env\n", "    name: shell-env\n    sha256: nope\n", 1)
	p, err = h.ApplyCompositionText(ctx, []byte(broken))
	if err != nil || len(p) == 0 || p[0].Line != 9 {
		t.Fatalf("broken edit: %+v %v", p, err)
	}
	assertFile(t, file, pairYAML)

	// Refused by the plugin when applied: the old text is written back.
	refused := pairYAML + "  - id: policy-refused\n    name: probe\n    config: {failApply: true}\n"
	p, err = h.ApplyCompositionText(ctx, []byte(refused))
	if err == nil || len(p) != 1 || p[0].Line != 12 || !strings.Contains(p[0].Message, "refuses to apply") {
		t.Fatalf("refused edit: %+v %v", p, err)
	}
	assertFile(t, file, pairYAML)
	if _, ok := viewOf(h, "policy-refused"); ok || pidOf(h, "probe") != probePid || pidOf(h, "env") != envPid {
		t.Fatalf("a refused edit changed the running set: %+v", h.Graph())
	}
	// A running entry's new config refused when applied: it runs on as
	// it was, and the graph shows why at its line until a change goes
	// through.
	p, err = h.ApplyCompositionText(ctx, []byte(strings.Replace(pairYAML, "fact: from-probe", "failApply: true", 1)))
	if err == nil || len(p) != 1 || p[0].Line != 3 {
		t.Fatalf("refused reload: %+v %v", p, err)
	}
	assertFile(t, file, pairYAML)
	if v, _ := viewOf(h, "probe"); pidOf(h, "probe") != probePid || v.LastError == nil || v.LastError.Line != 3 || !strings.Contains(v.LastError.Message, "refuses to apply") {
		t.Fatalf("probe after a refused reload: %+v (last error %+v)", v, v.LastError)
	}
	if p, err = h.ApplyCompositionText(ctx, []byte(pairYAML)); err != nil || len(p) != 0 {
		t.Fatalf("apply: %+v %v", p, err)
	}
	if v, _ := viewOf(h, "probe"); v.LastError != nil {
		t.Fatalf("a refused change's error outlived a change made since: %+v", v.LastError)
	}
	noReport(t, reports)

	// An edit in the file itself is still the watcher's (written aside
	// and renamed over it, so the watcher never sees it half written).
	if err := os.WriteFile(file+".next", []byte(added), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".next", file); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reports:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher did not apply an edit of the file")
	}
	if _, ok := viewOf(h, "policy-extra"); !ok {
		t.Fatal("the file's edit was not applied")
	}
}
