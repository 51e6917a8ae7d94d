package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/internal/testplugins/probev1"
)

// Edits of a running composition: only changed entries restart; a bad edit
// keeps the running composition; a rebuilt binary reloads its entry.
func TestHotReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "comp.yaml")
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		// mtime granularity: make every write a visible change.
		future := time.Now().Add(time.Duration(len(yaml)) * time.Millisecond)
		_ = os.Chtimes(file, future, future)
	}
	write(toolsYAML)
	comp, err := composition.Load(file, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := Start(ctx, comp, testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	reports := make(chan error, 10)
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.Watch(wctx, 20*time.Millisecond, os.LookupEnv, func(_ string, err error) { reports <- err })
	}()
	defer func() { stop(); wg.Wait() }()
	step := 0
	next := func() error {
		step++
		select {
		case err := <-reports:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("step %d: no reload reported (loaded %+v, now %+v)", step, h.compStamp, stamp(file))
			return nil
		}
	}

	envPid, bashPid, toolsPid := pidOf(h, "env"), pidOf(h, "bash"), pidOf(h, "tools")
	// A config change of the executor: only it restarts.
	write(strings.Replace(toolsYAML, "maxOutputBytes: 2000", "maxOutputBytes: 3000", 1))
	if err := next(); err != nil {
		t.Fatal(err)
	}
	if pidOf(h, "bash") == bashPid || pidOf(h, "env") != envPid || pidOf(h, "tools") != toolsPid {
		t.Fatalf("pids: env %d->%d bash %d->%d tools %d->%d", envPid, pidOf(h, "env"), bashPid, pidOf(h, "bash"), toolsPid, pidOf(h, "tools"))
	}
	if r := callTool(t, h, "agent", "bash", bashCall("seq 1 100000 | head -c 2500")); len(r.Text) != 2500-1 {
		t.Fatalf("new maxOutputBytes not applied: %d bytes", len(r.Text))
	}
	// A bad edit: reported, nothing restarts.
	bashPid = pidOf(h, "bash")
	write(strings.Replace(toolsYAML, "maxOutputBytes: 2000", "maxOutputBytes: lots", 1))
	if err := next(); err == nil || !strings.Contains(err.Error(), "maxOutputBytes") {
		t.Fatalf("bad edit: %v", err)
	}
	if pidOf(h, "bash") != bashPid {
		t.Fatal("a bad edit restarted the executor")
	}
	// Removing a provider others need is a bad edit too.
	write(strings.Replace(toolsYAML, "  - id: bash\n    name: bash-local\n", "", 1))
	if err := next(); err == nil || !strings.Contains(err.Error(), "cannot be removed") {
		t.Fatalf("removing the executor: %v", err)
	}
	// A new entry is started and loaded; removing it again disposes it.
	write(toolsYAML + "  - id: probe\n    name: probe\n    config: {fact: added}\n")
	if err := next(); err != nil {
		t.Fatal(err)
	}
	resp, err := probev1.NewProbeClient(h.Conn("probe")).Collect(ctx, &probev1.CollectRequest{})
	if err != nil || resp.Env["DSH_PROBE"] != "added" {
		t.Fatalf("added probe: %v %v", resp.GetEnv(), err)
	}
	probePid := pidOf(h, "probe")
	write(toolsYAML)
	if err := next(); err != nil {
		t.Fatal(err)
	}
	if testplugins.Alive(probePid) {
		t.Fatal("removed probe still running")
	}
	// A rebuilt binary reloads its entry.
	bin := h.find("env").binary
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, future, future); err != nil {
		t.Fatal(err)
	}
	if err := next(); err != nil {
		t.Fatal(err)
	}
	waitActive(t, h)
	if pidOf(h, "env") == envPid {
		t.Fatal("rebuilt shell-env was not reloaded")
	}
	if r := callTool(t, h, "agent", "bash", bashCall("echo $DSH_PROJECT")); r.Text != "demo" {
		t.Fatalf("after the reload: %q", r.Text)
	}
}
