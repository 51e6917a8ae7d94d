//go:build unix

package reliability

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// edit rewrites the served composition and waits until dsh serve logs
// what it did with it: want is "applied" or "kept the running composition".
func (s *serve) edit(t *testing.T, yaml, want string) string {
	t.Helper()
	before := strings.Count(s.stderr.String(), "hot reload: ")
	// One change of the file's stamp (written aside, then renamed over
	// it): written in place, the watcher could see a loaded machine's
	// write in two steps (the content, then the time) and act twice.
	tmp := s.file + ".next"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Duration(len(yaml)) * time.Millisecond)
	if err := os.Chtimes(tmp, future, future); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.file); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		log := s.stderr.String()
		if strings.Count(log, "hot reload: ") > before {
			last := log[strings.LastIndex(log, "hot reload: "):]
			if line, _, _ := strings.Cut(last, "\n"); !strings.Contains(line, want) {
				t.Fatalf("the edit was not %s: %s", want, line)
			}
			return last
		}
	}
	t.Fatalf("dsh serve did not act on the edit\nstderr:\n%s", s.stderr)
	return ""
}

// Edits of the composition a session runs on: a refused edit and an edit
// that fails halfway leave the session as it was, calls in flight and
// background jobs included.
func TestEditsDuringASession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	s := startServe(t, ctx, pulseComp)
	s.commandsRun(t, ctx, 1)
	bashPid := pluginPid(t, "bash-local")

	f := fault(t, "edit: a composition the plan refuses, during a call")
	done := make(chan string, 1)
	go func() {
		got, _ := s.bash(t, ctx, map[string]any{"command": "sleep 1.5; echo survived"})
		done <- got
	}()
	time.Sleep(200 * time.Millisecond)
	line := s.edit(t, strings.Replace(pulseComp, "    graceMs: 200\n", "    graceMs: soon\n", 1), "kept the running composition")
	if !strings.Contains(line, "graceMs") {
		t.Fatalf("the refusal does not say why: %s", line)
	}
	f.Saw("refused, naming graceMs")
	if got := receive(t, ctx, done, "the call in flight"); got != "survived" {
		t.Fatalf("the call in flight: %q", got)
	}
	f.Saw("the call in flight finished")
	if pluginPid(t, "bash-local") != bashPid {
		t.Fatal("a refused edit restarted the executor")
	}
	s.commandsRun(t, ctx, 20)
	f.Saw("executor untouched; 20 later commands exit 0")

	f = fault(t, "edit: two changes, the second fails to apply, during a background job")
	job, _ := s.bash(t, ctx, map[string]any{"command": "echo begun; sleep 2; echo job-done", "run_in_background": true})
	jid := jobID(job)
	probe := filepath.Join(binDir, "dsh-probe")
	bad := strings.Replace(pulseComp, "    graceMs: 200\n", "    graceMs: 300\n", 1) +
		"  - id: probe\n    path: " + probe + "\n    config: {fact: x, failApply: true}\n"
	line = s.edit(t, bad, "kept the running composition")
	if !strings.Contains(line, "probe refuses to apply") {
		t.Fatalf("the refusal does not say why: %s", line)
	}
	f.Saw("refused whole: %q", "probe refuses to apply")
	if pluginPid(t, "bash-local") != bashPid {
		t.Fatal("the executor's change was not undone")
	}
	if n := len(running(t, "bash-local")); n != 1 {
		t.Fatalf("%d bash-local processes after the undone edit", n)
	}
	if !listed(t, s, "tools") || listed(t, s, "probe") {
		t.Fatalf("dsh status after the undone edit:\n%s", strings.Join(status(t, s), "\n"))
	}
	f.Saw("the executor's change undone, no probe entry")
	var all string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(all, "job-done"); time.Sleep(200 * time.Millisecond) {
		out, err := s.call(ctx, "job_output", map[string]any{"job_id": jid})
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("job %s: %q %v", jid, all, err)
		}
		all += out
	}
	if !strings.Contains(all, "begun") {
		t.Fatalf("job %s lost output: %q", jid, all)
	}
	f.Saw("the job's whole output read")
	s.commandsRun(t, ctx, 20)
	f.Saw("20 later commands exit 0")

	f = fault(t, "dsh reload of the tool plugin during a call")
	go func() {
		got, _ := s.bash(t, ctx, map[string]any{"command": "sleep 1; echo survived-reload"})
		done <- got
	}()
	time.Sleep(300 * time.Millisecond)
	toolsPid := pluginPid(t, "tool-bash")
	out, err := s.dsh("reload", "tools")
	if err != nil {
		t.Fatalf("dsh reload tools: %v: %s", err, out)
	}
	if got := receive(t, ctx, done, "the call in flight"); got != "survived-reload" {
		t.Fatalf("the call in flight: %q", got)
	}
	if pluginPid(t, "tool-bash") == toolsPid {
		t.Fatal("tool-bash was not reloaded")
	}
	f.Saw("the call in flight finished on the old process; a new one serves")
	s.commandsRun(t, ctx, 20)
	f.Saw("20 later commands exit 0")
}

// dsh runs the dsh command against this host (status, reload).
func (s *serve) dsh(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "dsh"), args...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+s.rtBase)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// status is `dsh status`, one line per entry.
func status(t *testing.T, s *serve) []string {
	t.Helper()
	out, err := s.dsh("status")
	if err != nil {
		t.Fatalf("dsh status: %v: %s", err, out)
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

// listed reports whether dsh status has an entry id.
func listed(t *testing.T, s *serve, id string) bool {
	t.Helper()
	for _, line := range status(t, s) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == id {
			return true
		}
	}
	return false
}

// running lists the live processes of dsh-name.
func running(t *testing.T, name string) []int {
	t.Helper()
	exe := filepath.Join(binDir, "dsh-"+name)
	var out []int
	for _, pid := range testplugins.Running(binDir) {
		if got, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); got == exe {
			out = append(out, pid)
		}
	}
	return out
}
