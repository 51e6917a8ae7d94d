//go:build linux

package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshrun/dsh/host/termsessions/screen"
	"github.com/dshrun/dsh/internal/testplugins"
)

// collected gathers what a watch hands out.
type collected struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (c *collected) out(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(b)
}

func (c *collected) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startBgJob(t *testing.T, h *Host, owner, cmd string) string {
	t.Helper()
	res := callTool(t, h, owner, "bash", bashCall(cmd, "run_in_background", true))
	var job struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(res.Structured, &job); err != nil || job.JobID == "" {
		t.Fatalf("start %q: %q %s %v", cmd, res.Text, res.Structured, err)
	}
	return job.JobID
}

// The console follows a job's output from its first byte, though the
// agent read some of it before, and live to its end; the agent's own
// reads still get every byte, none twice.
func TestConsoleWatchJobOutput(t *testing.T) {
	h := startTools(t, toolsYAML)
	changes, stop := h.JobChanges()
	defer stop()
	<-changes
	gate := filepath.Join(t.TempDir(), "go")
	id := startBgJob(t, h, "agent", fmt.Sprintf(`for i in $(seq 1 5); do echo n$i; done; while [ ! -e %s ]; do sleep 0.02; done; for i in $(seq 6 40); do echo n$i; sleep 0.01; done; echo bye >&2; exit 3`, gate))
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("no change signalled for the new job")
	}
	jobs := h.Jobs()
	if len(jobs) != 1 || jobs[0].Owner != "agent" || jobs[0].ID != id || jobs[0].State != "running" || !strings.Contains(jobs[0].Command, "seq 6 40") || time.Since(jobs[0].Started) > time.Minute {
		t.Fatalf("jobs: %+v", jobs)
	}
	// The agent reads the first lines.
	var agent strings.Builder
	within(t, "the agent reads n5", func() bool {
		agent.WriteString(callTool(t, h, "agent", "job_output", map[string]string{"job_id": id}).Text)
		return strings.Contains(agent.String(), "n5\n")
	})

	watched := &collected{}
	type end struct {
		v   JobView
		err error
	}
	ended := make(chan end, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		v, err := h.WatchJobOutput(ctx, "agent", id, watched.out)
		ended <- end{v, err}
	}()
	within(t, "the watch shows the lines the agent read", func() bool { return strings.Contains(watched.String(), "n5\n") })
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var e end
	select {
	case e = <-ended:
	case <-time.After(60 * time.Second):
		t.Fatal("the watch did not end with the job")
	}
	if e.err != nil || e.v.State != "completed" || e.v.ExitCode != 3 || e.v.ID != id {
		t.Fatalf("the watch ended with %+v, %v", e.v, e.err)
	}
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&want, "n%d\n", i)
	}
	if got := watched.String(); strings.ReplaceAll(got, "bye\n", "") != want.String() || !strings.Contains(got, "bye\n") {
		t.Fatalf("watched %q", got)
	}
	if jobs := h.Jobs(); len(jobs) != 1 || jobs[0].State != "completed" || jobs[0].OutputBytes != int64(want.Len()+len("bye\n")) {
		t.Fatalf("jobs after the end: %+v", jobs)
	}
	// The agent's reads get the rest, and all of it once.
	agent.WriteString(readJobToEnd(t, h, "agent", id))
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(agent.String(), "[job "+id+" is still running]", ""), "\n") {
		if strings.HasPrefix(l, "n") {
			lines = append(lines, l)
		}
	}
	if strings.Join(lines, "\n")+"\n" != want.String() || !strings.Contains(agent.String(), "bye") {
		t.Fatalf("the agent read %q", agent.String())
	}
	// The job is forgotten: listed no more, and a watch says so.
	if jobs := h.Jobs(); len(jobs) != 0 {
		t.Fatalf("jobs after the final read: %+v", jobs)
	}
	if _, err := h.WatchJobOutput(context.Background(), "agent", id, watched.out); err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("a watch of a forgotten job: %v", err)
	}
	if _, err := h.WatchJobOutput(context.Background(), "someone-else", "j1", watched.out); err == nil {
		t.Fatal("a watch of another owner's job id worked")
	}
}

// running reports whether a live process runs exactly argv.
func running(argv ...string) bool {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == want {
			if pid, err := strconv.Atoi(e.Name()); err == nil && testplugins.Alive(pid) {
				return true
			}
		}
	}
	return false
}

// KillJob ends the job's whole tree, a grandchild included, as the
// agent's job_kill does.
func TestConsoleKillJobTree(t *testing.T) {
	h := startTools(t, toolsYAML)
	id := startBgJob(t, h, "agent", `sh -c 'sleep 3101 & sleep 3102; wait'; echo after`)
	within(t, "the grandchildren run", func() bool { return running("sleep", "3101") && running("sleep", "3102") })
	ended := make(chan JobView, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		v, err := h.WatchJobOutput(ctx, "agent", id, func([]byte) {})
		if err != nil {
			t.Errorf("watch: %v", err)
		}
		ended <- v
	}()
	if err := h.KillJob(context.Background(), "agent", id); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-ended:
		if v.State != "killed" {
			t.Fatalf("the watch of the killed job ended with %+v", v)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the watch went on after the kill")
	}
	within(t, "the tree is gone", func() bool { return !running("sleep", "3101") && !running("sleep", "3102") })
	within(t, "the job is seen killed", func() bool {
		jobs := h.Jobs()
		return len(jobs) == 1 && jobs[0].State == "killed"
	})
	if err := h.KillJob(context.Background(), "agent", id); err != nil {
		t.Fatalf("a second kill: %v", err)
	}
	if err := h.KillJob(context.Background(), "other", id); err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("another owner's kill: %v", err)
	}
}

// The console sees a terminal: first its screen as it stands (the prompt
// and what the agent ran before), then live output; what it types runs;
// the agent still reads all of it.
func TestConsoleWatchTerminal(t *testing.T) {
	h := startTools(t, termYAML)
	s := openTerm(t, h, "agent", "name", "main")
	first := readPrompt(t, h, "agent", s.ID, "")
	sendLine(t, h, "agent", s.ID, "echo before-$((20+1))")
	readPrompt(t, h, "agent", s.ID, "before-21")
	// The prompt as it shows: the last line, after its escape sequences
	// (bracketed paste on, the shell integration mark ended by BEL).
	prompt := strings.TrimRight(first[strings.LastIndexByte(first, '\n')+1:], " \r")
	prompt = prompt[strings.LastIndexByte(prompt, '\a')+1:]
	if prompt == "" {
		t.Fatalf("no prompt in %q", first)
	}
	terms := h.Terminals()
	if len(terms) != 1 || terms[0].Owner != "agent" || terms[0].ID != s.ID || terms[0].Cols != 80 || terms[0].Rows != 24 || !terms[0].Alive || terms[0].Command != "bash (main)" {
		t.Fatalf("terminals: %+v", terms)
	}

	// What the watch hands out, painted as xterm.js would.
	view := screen.New(80, 24, nil)
	defer view.Close()
	ended := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ended <- h.WatchTerminal(ctx, "agent", s.ID, func(b []byte) { _, _ = view.Write(b) })
	}()
	within(t, "the watch paints the screen as it stands", func() bool {
		vp := view.Viewport()
		return strings.Contains(vp, "before-21") && strings.HasSuffix(strings.TrimRight(vp, " "), prompt)
	})
	if err := h.WriteTerminal(context.Background(), "agent", s.ID, []byte("echo typed-$((6*7))\r")); err != nil {
		t.Fatal(err)
	}
	within(t, "the typed command's output shows", func() bool { return strings.Contains(view.Viewport(), "\ntyped-42") })
	// Nothing was taken from the agent.
	readPrompt(t, h, "agent", s.ID, "\rtyped-42\r\n")
	if err := h.WriteTerminal(context.Background(), "agent", "t-none", []byte("x")); err == nil {
		t.Fatal("typed into no terminal")
	}

	// The shell exits: the watch ends, the console hears of it, and the
	// session is listed as not alive until the agent closes it.
	changes, stop := h.JobChanges()
	defer stop()
	<-changes
	if err := h.WriteTerminal(context.Background(), "agent", s.ID, []byte("exit\r")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the watch ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch went on after the shell exited")
	}
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("no change signalled for the shell's end")
	}
	if terms := h.Terminals(); len(terms) != 1 || terms[0].Alive {
		t.Fatalf("terminals after the shell exited: %+v", terms)
	}
	mustTerm(t, h, "agent", map[string]any{"op": "close", "id": s.ID})
	if terms := h.Terminals(); len(terms) != 0 {
		t.Fatalf("terminals after close: %+v", terms)
	}
}
