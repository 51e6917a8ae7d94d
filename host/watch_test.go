//go:build unix

package host

import (
	"context"
	"encoding/json"
	"fmt"
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
	// Each edit is one change of the file's stamp (written aside, then
	// renamed over it): written in place, the watcher polling every 20 ms
	// could see a loaded machine's write in two steps (the content, then
	// the time) and report twice, or see it half done.
	write := func(yaml string) {
		t.Helper()
		tmp := file + ".next"
		if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		// mtime granularity: make every write a visible change.
		future := time.Now().Add(time.Duration(len(yaml)) * time.Millisecond)
		if err := os.Chtimes(tmp, future, future); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
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
	bin := h.find("env").bin()
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

// startFile writes yaml to file and starts a host on it.
func startFile(t *testing.T, file, yaml string) *Host {
	t.Helper()
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	comp, err := composition.Load(file, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return startHost(t, comp)
}

// applyFile writes yaml to file and applies it to the running host, as an
// edit seen by the watcher would be.
func applyFile(t *testing.T, h *Host, file, yaml string) error {
	t.Helper()
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	next, err := composition.Load(file, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.ApplyComposition(ctx, next)
}

// copyBinary copies an entry's binary into dir under name: "a new version".
func copyBinary(t *testing.T, h *Host, id, dir, name string) (orig, copied string) {
	t.Helper()
	orig = h.find(id).bin()
	b, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	copied = filepath.Join(dir, name)
	if err := os.WriteFile(copied, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return orig, copied
}

// An edit that points an entry at another binary (name, path or sha256)
// reloads it onto that binary, make-before-break: background jobs and the
// other entries carry on. A binary with other keys, or one that fails its
// checksum, is refused and the running one keeps serving.
func TestHotReloadMovesBinary(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "comp.yaml")
	h := startFile(t, file, toolsYAML)
	apply := func(yaml string) error { return applyFile(t, h, file, yaml) }
	orig, v2 := copyBinary(t, h, "bash", dir, "dsh-bash-local-v2")
	res := callTool(t, h, "agent", "bash", bashCall("echo one; sleep 1; echo two", "run_in_background", true))
	var job struct {
		JobID string `json:"jobId"`
	}
	_ = json.Unmarshal(res.Structured, &job)
	envPid, bashPid, toolsPid := pidOf(h, "env"), pidOf(h, "bash"), pidOf(h, "tools")

	moved := strings.Replace(toolsYAML, "    name: bash-local\n", "    path: "+v2+"\n", 1)
	if err := apply(moved); err != nil {
		t.Fatal(err)
	}
	if got := h.find("bash").bin(); got != v2 {
		t.Fatalf("bash runs %s, want %s", got, v2)
	}
	newPid := pidOf(h, "bash")
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", newPid)); exe != v2 {
		t.Fatalf("bash process %d runs %q, want %s", newPid, exe, v2)
	}
	if newPid == bashPid || testplugins.Alive(bashPid) || pidOf(h, "env") != envPid || pidOf(h, "tools") != toolsPid {
		t.Fatalf("pids: bash %d->%d (old alive %v), env %d->%d, tools %d->%d",
			bashPid, newPid, testplugins.Alive(bashPid), envPid, pidOf(h, "env"), toolsPid, pidOf(h, "tools"))
	}
	if r := callTool(t, h, "agent", "bash", bashCall("echo via-v2")); afterNotices(r.Text) != "via-v2" {
		t.Fatalf("after the move: %q", r.Text)
	}

	// Another binary with other keys: refused, the executor keeps serving.
	probe := filepath.Join(filepath.Dir(orig), "dsh-probe")
	err := apply(strings.Replace(toolsYAML, "    name: bash-local\n", "    path: "+probe+"\n", 1))
	if err == nil || !strings.Contains(err.Error(), "other keys") || !strings.Contains(err.Error(), `"bash"`) {
		t.Fatalf("a binary with other keys: %v", err)
	}
	// A wrong checksum: refused before anything runs.
	err = apply(strings.Replace(moved, "    path: "+v2+"\n", "    path: "+v2+"\n    sha256: "+strings.Repeat("ab", 32)+"\n", 1))
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("a wrong checksum: %v", err)
	}
	if pidOf(h, "bash") != newPid || h.find("bash").bin() != v2 {
		t.Fatal("a refused move replaced the running executor")
	}
	if r := callTool(t, h, "agent", "bash", bashCall("echo still")); afterNotices(r.Text) != "still" {
		t.Fatalf("after refused moves: %q", r.Text)
	}

	// A consumer moves too: it restarts on the new binary and registers
	// its tools again.
	_, tools2 := copyBinary(t, h, "tools", dir, "dsh-tool-bash-v2")
	toolsPid = pidOf(h, "tools")
	if err := apply(strings.Replace(moved, "    name: tool-bash\n", "    path: "+tools2+"\n", 1)); err != nil {
		t.Fatal(err)
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pidOf(h, "tools"))); exe != tools2 || testplugins.Alive(toolsPid) {
		t.Fatalf("tools runs %q (old alive %v), want %s", exe, testplugins.Alive(toolsPid), tools2)
	}
	// (The job may have finished by now: its notice comes first.)
	if r := callTool(t, h, "agent", "bash", bashCall("echo tools-v2")); !strings.HasSuffix(r.Text, "\ntools-v2") && r.Text != "tools-v2" {
		t.Fatalf("after moving the tool plugin: %q", r.Text)
	}

	// The job started before the move finishes with all its output.
	if all := readJobToEnd(t, h, "agent", job.JobID); !strings.Contains(all, "one") || !strings.Contains(all, "two") {
		t.Fatalf("job across the move: %q", all)
	}
	h.Close(context.Background())
	if testplugins.Alive(newPid) {
		t.Error("the moved executor outlived the host")
	}
}

// A provider whose new binary fails to apply keeps serving from its old
// process (which is still the entry's current one), the entry keeps its old
// binary, and nothing of the new one is left running.
func TestHotReloadFailedMoveRestores(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "comp.yaml")
	h := startFile(t, file, pairYAML)
	orig, v2 := copyBinary(t, h, "probe", dir, "dsh-probe-v2")
	bad := strings.Replace(pairYAML, "    name: probe\n    config:\n      fact: from-probe\n",
		"    path: "+v2+"\n    config:\n      fact: from-v2\n      failApply: true\n", 1)
	if err := applyFile(t, h, file, bad); err == nil {
		t.Fatal("a move onto a binary that fails to apply succeeded")
	}
	waitActive(t, h)
	en := h.find("probe")
	if en.bin() != orig {
		t.Fatalf("after a failed move the entry runs %s, want %s", en.bin(), orig)
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pidOf(h, "probe"))); exe != orig {
		t.Fatalf("probe process runs %q, want %s", exe, orig)
	}
	resp, err := probev1.NewProbeClient(h.Conn("probe")).Collect(context.Background(), &probev1.CollectRequest{})
	if err != nil || resp.Env["DSH_PROBE"] != "from-probe" {
		t.Fatalf("after the failed move: %v %v", resp.GetEnv(), err)
	}
	for _, pid := range testplugins.Matching(v2) {
		t.Errorf("a process of the refused binary is left: %s", pid)
	}
}

// An edit is a transaction: when one of its changes fails to apply, the
// changes that did apply are undone, and the host runs as before the edit.
func TestHotReloadRollsBack(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "comp.yaml")
	h := startFile(t, file, toolsYAML)
	bashBin := h.find("bash").bin()
	bashPid, toolsPid := pidOf(h, "bash"), pidOf(h, "tools")
	// 2500 bytes are cut under maxOutputBytes 2000, whole under 3000.
	capped := func() bool {
		return strings.Contains(callTool(t, h, "agent", "bash", bashCall("seq 1 100000 | head -c 2500")).Text, "[output truncated")
	}
	if !capped() {
		t.Fatal("before the edit: not cut")
	}
	// Two changes: the executor's config (applies) and a new entry whose
	// Apply fails.
	edit := strings.Replace(toolsYAML, "maxOutputBytes: 2000", "maxOutputBytes: 3000", 1) +
		"  - id: probe\n    name: probe\n    config: {fact: added, failApply: true}\n"
	err := applyFile(t, h, file, edit)
	if err == nil || !strings.Contains(err.Error(), "probe refuses to apply") || !strings.Contains(err.Error(), `plugin "probe"`) {
		t.Fatalf("an edit with a failing change: %v", err)
	}
	waitActive(t, h)
	if pidOf(h, "bash") != bashPid || pidOf(h, "tools") != toolsPid {
		t.Fatalf("pids after the undone edit: bash %d->%d tools %d->%d", bashPid, pidOf(h, "bash"), toolsPid, pidOf(h, "tools"))
	}
	if !capped() {
		t.Fatal("the undone config change still applies")
	}
	if got := testplugins.Matching(bashBin); len(got) != 1 {
		t.Fatalf("processes of %s after the undone edit: %v", bashBin, got)
	}
	probeBin := filepath.Join(filepath.Dir(bashBin), "dsh-probe")
	if got := testplugins.Matching(probeBin); len(got) != 0 {
		t.Fatalf("a process of the refused entry is left: %v", got)
	}
	for _, st := range h.Status() {
		if st.ID == "probe" {
			t.Fatalf("the refused entry is listed: %+v", st)
		}
	}
	if _, _, ok := h.Registry().Lookup("probe"); ok {
		t.Fatal("the refused entry's key is provided")
	}

	// The same edit without the failure applies whole, and the added
	// provider's services are known by name (a caller need not name the key).
	if err := applyFile(t, h, file, strings.Replace(edit, ", failApply: true", "", 1)); err != nil {
		t.Fatal(err)
	}
	if capped() {
		t.Fatal("after the edit: still cut")
	}
	if got := h.keyOfService(probev1.Probe_ServiceDesc.ServiceName); got != "probe" {
		t.Fatalf("the added provider's service maps to %q", got)
	}
	if got := testplugins.Matching(bashBin); len(got) != 1 {
		t.Fatalf("processes of %s after the edit: %v", bashBin, got)
	}
}

// afterNotices is a result's text without the notices of jobs that ended
// meanwhile, which come first: the background job this test started ends
// during it, at a time the machine's load decides.
func afterNotices(text string) string {
	for strings.HasPrefix(text, "[job ") {
		_, rest, ok := strings.Cut(text, "\n")
		if !ok {
			return ""
		}
		text = strings.TrimPrefix(rest, "\n")
	}
	return text
}
