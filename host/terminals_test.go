//go:build linux

package host

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// ctx.terminals through the real plugins: dsh-terminal-bash registers the
// bash backend, dsh-termdrive calls ctx.terminals from its tool "term" as
// the agent of each call.

const termYAML = `
plugins:
  - id: term
    name: terminal-bash
  - id: drive
    name: termdrive
`

// termResult is what a term call answered: a session, an output, a list,
// or an error's kind.
type termResult struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Backend   string       `json:"backend"`
	Status    string       `json:"status"`
	Pid       int          `json:"pid"`
	Cols      int          `json:"cols"`
	Rows      int          `json:"rows"`
	ExitCode  *int         `json:"exitCode"`
	Session   *termResult  `json:"session"`
	Data      string       `json:"data"` // base64
	AtPrompt  bool         `json:"atPrompt"`
	Delivered bool         `json:"delivered"`
	Sessions  []termResult `json:"sessions"`
	Error     string       `json:"error"`
	Message   string       `json:"message"`
}

func (r termResult) text() string {
	b, _ := base64.StdEncoding.DecodeString(r.Data)
	return string(b)
}

// term makes one ctx.terminals call for owner through the driver.
func term(t *testing.T, h *Host, owner string, args map[string]any) termResult {
	t.Helper()
	return termWithin(t, h, owner, 30*time.Second, args)
}

func termWithin(t *testing.T, h *Host, owner string, d time.Duration, args map[string]any) termResult {
	t.Helper()
	b, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := h.CallTool(ctx, ToolCall{Owner: owner, Tool: "term", Arguments: b})
	if err != nil {
		return termResult{Error: "call", Message: err.Error()}
	}
	var r termResult
	if err := json.Unmarshal(res.Structured, &r); err != nil {
		t.Fatalf("term %s: %q: %v", b, res.Structured, err)
	}
	return r
}

func mustTerm(t *testing.T, h *Host, owner string, args map[string]any) termResult {
	t.Helper()
	r := term(t, h, owner, args)
	if r.Error != "" {
		t.Fatalf("term %v: %s: %s", args, r.Error, r.Message)
	}
	return r
}

func openTerm(t *testing.T, h *Host, owner string, more ...any) termResult {
	t.Helper()
	args := map[string]any{"op": "open"}
	for i := 0; i+1 < len(more); i += 2 {
		args[more[i].(string)] = more[i+1]
	}
	return mustTerm(t, h, owner, args)
}

// readPrompt reads session id until its output holds want and ends at the
// shell's prompt; it returns what it read.
func readPrompt(t *testing.T, h *Host, owner, id, want string) string {
	t.Helper()
	var all strings.Builder
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		r := mustTerm(t, h, owner, map[string]any{"op": "read", "id": id, "waitMs": 1000})
		all.WriteString(r.text())
		if r.AtPrompt && strings.Contains(all.String(), want) {
			return all.String()
		}
		if r.Session != nil && r.Session.Status == "exited" {
			t.Fatalf("session %s exited before %q: read %q", id, want, all.String())
		}
	}
	t.Fatalf("session %s: no %q and a prompt in %q", id, want, all.String())
	return ""
}

func sendLine(t *testing.T, h *Host, owner, id, line string) {
	t.Helper()
	mustTerm(t, h, owner, map[string]any{"op": "send", "id": id, "text": line, "submit": true})
}

// ppidOf is the parent of pid.
func ppidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, _ := strconv.Atoi(f[1])
	return n
}

// A session end to end: opened through the bash backend, a command sent and
// read back, the prompt recognised; the shell is the host's child, not the
// plugin's; a request that serves no tool call is refused.
func TestTerminalEndToEnd(t *testing.T) {
	h := startTools(t, termYAML)
	dir := t.TempDir()
	s := openTerm(t, h, "agent", "name", "main", "cwd", dir, "cols", 100, "rows", 30)
	if s.ID == "" || s.Name != "main" || s.Backend != "bash" || s.Status != "running" || s.Cols != 100 || s.Rows != 30 || s.Pid == 0 {
		t.Fatalf("opened: %+v", s)
	}
	if p := ppidOf(s.Pid); p != os.Getpid() {
		t.Fatalf("the shell's parent is %d, not the host (%d)", p, os.Getpid())
	}
	readPrompt(t, h, "agent", s.ID, "")
	sendLine(t, h, "agent", s.ID, "echo hi; pwd; stty size; echo $PS1")
	out := readPrompt(t, h, "agent", s.ID, "30 100")
	for _, want := range []string{"\rhi\r\n", "\r\n" + dir + "\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in %q", want, out)
		}
	}
	// PS1 changed by a command is set again before the next prompt.
	sendLine(t, h, "agent", s.ID, "PS1='gone> '")
	readPrompt(t, h, "agent", s.ID, "")
	if r := mustTerm(t, h, "agent", map[string]any{"op": "resize", "id": s.ID, "cols": 120, "rows": 40}); r.Cols != 120 || r.Rows != 40 {
		t.Fatalf("resize: %+v", r)
	}
	sendLine(t, h, "agent", s.ID, "stty size")
	readPrompt(t, h, "agent", s.ID, "40 120")
	if l := mustTerm(t, h, "agent", map[string]any{"op": "list"}); len(l.Sessions) != 1 || l.Sessions[0].ID != s.ID {
		t.Fatalf("list: %+v", l)
	}
	if r := term(t, h, "agent", map[string]any{"op": "list", "outside": true}); r.Error != "permission denied" || !strings.Contains(r.Message, "belong to an agent") {
		t.Fatalf("a request outside a tool call: %+v", r)
	}
	if r := term(t, h, "agent", map[string]any{"op": "open", "backend": "zsh"}); r.Error != "NO_BACKEND" || !strings.Contains(r.Message, `"zsh"`) {
		t.Fatalf("an unknown backend: %+v", r)
	}
	if r := term(t, h, "agent", map[string]any{"op": "open", "name": "main"}); r.Error != "DUPLICATE_NAME" {
		t.Fatalf("a name twice: %+v", r)
	}
	if r := mustTerm(t, h, "agent", map[string]any{"op": "close", "id": s.ID}); r.Status != "exited" {
		t.Fatalf("close: %+v", r)
	}
	if testplugins.Alive(s.Pid) {
		t.Fatal("the shell lives after close")
	}
}

// SIGINT interrupts a foreground sleep and leaves the shell; a SIGKILL
// for the shell is refused in favour of close.
func TestTerminalInterrupt(t *testing.T) {
	h := startTools(t, termYAML)
	s := openTerm(t, h, "agent")
	readPrompt(t, h, "agent", s.ID, "")
	sendLine(t, h, "agent", s.ID, "sleep 4711")
	for deadline := time.Now().Add(10 * time.Second); len(testplugins.Matching("sleep 4711")) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sleep did not start")
		}
	}
	if r := mustTerm(t, h, "agent", map[string]any{"op": "signal", "id": s.ID, "signal": "SIGINT"}); !r.Delivered {
		t.Fatalf("SIGINT: %+v", r)
	}
	readPrompt(t, h, "agent", s.ID, "")
	sendLine(t, h, "agent", s.ID, "echo status=$?")
	readPrompt(t, h, "agent", s.ID, "status=130")
	if len(testplugins.Matching("sleep 4711")) > 0 {
		t.Fatal("the sleep lives")
	}
	if r := term(t, h, "agent", map[string]any{"op": "signal", "id": s.ID, "signal": "SIGKILL", "shell": true}); r.Error != "SHELL_KILL" || !strings.Contains(r.Message, "close the session") {
		t.Fatalf("SIGKILL for the shell: %+v", r)
	}
	if !testplugins.Alive(s.Pid) {
		t.Fatal("the shell died")
	}
}

// Close answers once the whole tree is gone: setsid and nohup children
// too.
func TestTerminalCloseTakesTree(t *testing.T) {
	h := startTools(t, termYAML)
	if !h.sub.Cgroups() {
		t.Skip("no cgroups here: setsid children escape a process group")
	}
	s := openTerm(t, h, "agent")
	readPrompt(t, h, "agent", s.ID, "")
	sendLine(t, h, "agent", s.ID, "setsid sleep 4721 & nohup sleep 4722 >/dev/null 2>&1 & echo st''arted")
	readPrompt(t, h, "agent", s.ID, "started")
	for deadline := time.Now().Add(10 * time.Second); len(testplugins.Matching("sleep 472")) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the children did not start: %v", testplugins.Matching("sleep 472"))
		}
	}
	mustTerm(t, h, "agent", map[string]any{"op": "close", "id": s.ID})
	if left := testplugins.Matching("sleep 472"); len(left) > 0 {
		t.Fatalf("left after close: %v", left)
	}
}

// Another owner can neither send, read, signal, resize nor close a
// session, and does not list it: each is answered as for no session.
func TestTerminalOwnersApart(t *testing.T) {
	h := startTools(t, termYAML)
	s := openTerm(t, h, "a")
	for _, op := range []map[string]any{
		{"op": "send", "id": s.ID, "text": "echo pwned > /tmp/pwned-by-b", "submit": true},
		{"op": "read", "id": s.ID},
		{"op": "signal", "id": s.ID, "signal": "SIGINT"},
		{"op": "resize", "id": s.ID, "cols": 10, "rows": 10},
		{"op": "close", "id": s.ID},
	} {
		if r := term(t, h, "b", op); r.Error != "NO_SESSION" || strings.Contains(r.Message, "owner") {
			t.Errorf("%v by another owner: %+v", op["op"], r)
		}
	}
	if l := mustTerm(t, h, "b", map[string]any{"op": "list"}); len(l.Sessions) != 0 {
		t.Fatalf("another owner lists %+v", l.Sessions)
	}
	out := readPrompt(t, h, "a", s.ID, "")
	if strings.Contains(out, "pwned") {
		t.Fatalf("another owner's input reached the session: %q", out)
	}
	sendLine(t, h, "a", s.ID, "echo mi''ne")
	readPrompt(t, h, "a", s.ID, "mine")
}

// 100 sessions open at once in one owner all answer; the owner may hold
// 128, and the 129th is refused with the reason.
func TestTerminalHundredAndCap(t *testing.T) {
	h := startTools(t, termYAML)
	const n = 100
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan string, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			r := term(t, h, "agent", map[string]any{"op": "open", "name": fmt.Sprintf("s%d", i)})
			if r.Error != "" {
				errs <- r.Error + ": " + r.Message
				return
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	opened := time.Since(start)
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	start = time.Now()
	for i, id := range ids {
		wg.Go(func() {
			sendLine(t, h, "agent", id, fmt.Sprintf("echo ok-$((%d+1000))", i))
			readPrompt(t, h, "agent", id, fmt.Sprintf("ok-%d", i+1000))
		})
	}
	wg.Wait()
	t.Logf("%d sessions opened at once in %v; each answered a command within %v", n, opened, time.Since(start))
	for i := n; i < 128; i++ {
		openTerm(t, h, "agent")
	}
	r := term(t, h, "agent", map[string]any{"op": "open"})
	if r.Error != "too many sessions" || !strings.Contains(r.Message, "128 terminal sessions are open") || !strings.Contains(r.Message, "close one") {
		t.Fatalf("the 129th: %+v", r)
	}
	// Another owner is not counted.
	openTerm(t, h, "other")
	if l := mustTerm(t, h, "agent", map[string]any{"op": "list"}); len(l.Sessions) != 128 {
		t.Fatalf("listed %d", len(l.Sessions))
	}
}

// The backend reloaded, then killed -9, while a session runs: the session
// is the host's, keeps its shell state, and works through the new backend
// process each time; a new session opens too.
func TestTerminalSurvivesBackend(t *testing.T) {
	h := startTools(t, termYAML)
	s := openTerm(t, h, "agent")
	readPrompt(t, h, "agent", s.ID, "")
	sendLine(t, h, "agent", s.ID, "export KEPT=st''ate; cd /tmp")
	readPrompt(t, h, "agent", s.ID, "")
	old := pidOf(h, "term")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Reload(ctx, "term"); err != nil {
		t.Fatal(err)
	}
	if pid := pidOf(h, "term"); pid == old || pid == 0 || testplugins.Alive(old) {
		t.Fatalf("not reloaded: pid %d (was %d)", pid, old)
	}
	if !testplugins.Alive(s.Pid) {
		t.Fatal("the shell died with the backend's reload")
	}
	sendLine(t, h, "agent", s.ID, "echo $KEPT $PWD")
	readPrompt(t, h, "agent", s.ID, "state /tmp")

	old = pidOf(h, "term")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The send waits for the restarted backend.
	sendLine(t, h, "agent", s.ID, "echo again $KEPT")
	readPrompt(t, h, "agent", s.ID, "again state")
	if pid := pidOf(h, "term"); pid == old || pid == 0 {
		t.Fatalf("not restarted: pid %d (was %d)", pid, old)
	}
	n := openTerm(t, h, "agent")
	readPrompt(t, h, "agent", n.ID, "")
}

// An owner's release ends its sessions (their shells gone) and no more
// open for it; other owners' go on.
func TestTerminalOwnerRelease(t *testing.T) {
	h := startTools(t, termYAML)
	a1, a2 := openTerm(t, h, "a"), openTerm(t, h, "a")
	b := openTerm(t, h, "b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.ReleaseOwner(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []termResult{a1, a2} {
		if testplugins.Alive(s.Pid) {
			t.Fatalf("a released owner's shell %d lives", s.Pid)
		}
	}
	if r := term(t, h, "a", map[string]any{"op": "open"}); r.Error != "OWNER_NOT_LIVE" {
		t.Fatalf("an open for a released owner: %+v", r)
	}
	readPrompt(t, h, "b", b.ID, "")
}

// The host's stop ends every session of every owner, and everything they
// started.
func TestTerminalHostStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, termYAML), testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, owner := range []string{"a", "b"} {
		s := openTerm(t, h, owner)
		readPrompt(t, h, owner, s.ID, "")
		sendLine(t, h, owner, s.ID, "setsid sleep 4731 & echo st''arted")
		readPrompt(t, h, owner, s.ID, "started")
		pids = append(pids, s.Pid)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if testplugins.Alive(pid) {
			t.Fatalf("shell %d outlived the host", pid)
		}
	}
	if h.sub.Cgroups() {
		if left := testplugins.Matching("sleep 4731"); len(left) > 0 {
			t.Fatalf("left after the host stopped: %v", left)
		}
	}
}

// After each way a call ends (a close, a shell killed, a call that ran
// out of time) the next open works, and so do the sessions left.
func TestTerminalNextOpenWorks(t *testing.T) {
	h := startTools(t, termYAML)
	next := func(why string) termResult {
		t.Helper()
		s := openTerm(t, h, "agent")
		readPrompt(t, h, "agent", s.ID, "")
		sendLine(t, h, "agent", s.ID, "echo af''ter-"+why)
		readPrompt(t, h, "agent", s.ID, "after-"+why)
		return s
	}
	// A close.
	s := next("start")
	mustTerm(t, h, "agent", map[string]any{"op": "close", "id": s.ID})
	// A kill: the shell killed from inside.
	s = next("close")
	sendLine(t, h, "agent", s.ID, "kill -9 $$")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := mustTerm(t, h, "agent", map[string]any{"op": "read", "id": s.ID})
		if r.Session.Status == "exited" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed shell is not reported exited")
		}
	}
	if r := term(t, h, "agent", map[string]any{"op": "send", "id": s.ID, "text": "echo x", "submit": true}); r.Error != "" || r.Status != "exited" {
		t.Fatalf("a send to the killed shell: %+v", r)
	}
	mustTerm(t, h, "agent", map[string]any{"op": "close", "id": s.ID})
	// A call that runs out of time: a read waiting past its deadline, and
	// a send into a terminal that takes no more input.
	s = next("kill")
	if r := termWithin(t, h, "agent", 300*time.Millisecond, map[string]any{"op": "read", "id": s.ID, "waitMs": 5000}); r.Error == "" {
		t.Fatalf("a read past its deadline answered: %+v", r)
	}
	sendLine(t, h, "agent", s.ID, "stty raw -echo; sleep 30")
	if r := termWithin(t, h, "agent", 500*time.Millisecond, map[string]any{"op": "send", "id": s.ID, "text": strings.Repeat("y", 1<<20)}); r.Error == "" {
		t.Fatalf("a send nobody reads answered: %+v", r)
	}
	mustTerm(t, h, "agent", map[string]any{"op": "signal", "id": s.ID, "signal": "SIGINT"})
	next("timeout")
}

// Backends by name: a second bash backend under another name is chosen by
// name, and an open naming none of two is refused.
func TestTerminalBackendsByName(t *testing.T) {
	h := startTools(t, termYAML+`
  - id: term2
    name: terminal-bash
    config: {name: second}
`)
	if r := term(t, h, "agent", map[string]any{"op": "open"}); r.Error != "NO_BACKEND" || !strings.Contains(r.Message, "bash, second") {
		t.Fatalf("an open naming none of two: %+v", r)
	}
	s := openTerm(t, h, "agent", "backend", "second")
	if s.Backend != "second" {
		t.Fatalf("opened with %q", s.Backend)
	}
	readPrompt(t, h, "agent", s.ID, "")
}

// Two plugins claiming one backend name cannot both start.
func TestTerminalDuplicateBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Start(ctx, writeComp(t, termYAML+`
  - id: term2
    name: terminal-bash
`), testOptions(t, nil))
	if err == nil || !strings.Contains(err.Error(), `terminal backend "bash" is registered by plugin`) {
		t.Fatalf("two backends named bash: %v", err)
	}
}

// A call that fails (here given up on while its tool hangs) never told
// anyone what it started: the processes it left running are stopped, not
// left to run unseen until their owner ends. A terminal session it opened
// stays: the agent finds it in its list of sessions. And a call that
// answers leaves its processes alone.
func TestFailedCallStopsWhatItStarted(t *testing.T) {
	h := startTools(t, termYAML)
	dir := t.TempDir()
	held := func(args map[string]any, started func() bool) {
		t.Helper()
		args["hold"], args["cwd"] = true, dir
		b, _ := json.Marshal(args)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		failed := make(chan error, 1)
		go func() {
			_, err := h.CallTool(ctx, ToolCall{Owner: "agent", Tool: "term", Arguments: b})
			failed <- err
		}()
		within(t, "the held call started its work", started)
		cancel()
		select {
		case err := <-failed:
			if err == nil {
				t.Fatal("a held call given up on answered")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a held call did not end within 30s of being given up on")
		}
	}

	held(map[string]any{"op": "spawn", "argv": []string{"sleep", "271.5"}}, func() bool { return len(testplugins.Matching("sleep 271.5")) > 0 })
	within(t, "the failed call's process is stopped", func() bool { return len(testplugins.Matching("sleep 271.5")) == 0 })

	held(map[string]any{"op": "open", "name": "kept"}, func() bool {
		return len(mustTerm(t, h, "agent", map[string]any{"op": "list"}).Sessions) == 1
	})
	s := mustTerm(t, h, "agent", map[string]any{"op": "list"}).Sessions[0]
	sendLine(t, h, "agent", s.ID, "echo st''ill here")
	readPrompt(t, h, "agent", s.ID, "still here")

	mustTerm(t, h, "agent", map[string]any{"op": "spawn", "argv": []string{"sleep", "271.75"}, "cwd": dir})
	time.Sleep(200 * time.Millisecond)
	if len(testplugins.Matching("sleep 271.75")) == 0 {
		t.Fatal("the process of a call that answered was stopped")
	}
}
