package reliability

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/bounded"
)

// listIDRE finds the persistent shell's id in terminal_list's text.
var listIDRE = regexp.MustCompile(`(t\d+-[0-9a-f]{12})  persistent-bash `)

// noteFresh starts the result of a command run in a fresh shell.
const noteFresh = "[this command runs in a fresh shell (working directory and variables as a new shell has them)]"

// noteUntrusted starts the end of a result whose shell was closed for
// giving no true end.
const noteUntrusted = "[the shell did not report how the command ended"

// pbash calls the persistent bash tool and fails the test on any text that
// shows a marker.
func pbash(t *testing.T, ctx context.Context, cs *mcp.ClientSession, command string, extra ...any) (string, *mcp.CallToolResult) {
	t.Helper()
	args := map[string]any{"command": command}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	text, r := callText(t, ctx, cs, "bash", args)
	if strings.Contains(text, "__DSH_PERSISTENT_BASH") || strings.Contains(text, "DSH_PERSISTENT") {
		t.Fatalf("a marker in the text of %q:\n%s", command, text)
	}
	return text, r
}

// One agent's persistent shell through dsh serve and the real plugins,
// a command after each way one can end: state carries over; an exit
// status; a command that waits for input returns what it printed and the
// next one interrupts it; a timeout closes the shell and the next command
// gets a fresh one; so does exit; kill -9 of the tool's plugin keeps the
// shell; meanwhile the shell is a terminal of the agent's that answers a
// send with SEND_ACTIVE; another agent has a shell of its own.
func TestPersistentBash(t *testing.T) {
	if _, err := syscall.Getpgid(1); err != nil {
		t.Skip("needs /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := startHTTP(t, terminalsComp(t))
	a := s.connect(t, ctx)
	dir := t.TempDir()

	f := fault(t, "persistent bash: state between calls")
	if text, r := pbash(t, ctx, a, "cd "+dir+" && export KEPT=yes && f() { echo from-f; }"); text != noteFresh || r.IsError {
		t.Fatalf("cd and export: %q", text)
	}
	text, _ := pbash(t, ctx, a, "pwd; echo $KEPT; f; echo $DSH_COMPOSITION")
	if text != dir+"\nyes\nfrom-f\nterminals" {
		t.Fatalf("the state of the shell: %q", text)
	}
	text, _ = pbash(t, ctx, a, "printf 'no newline'; false")
	if text != "no newline\n[exit code: 1]" {
		t.Fatalf("an exit status: %q", text)
	}
	// A command of several lines, with quotes, a here-document, history
	// characters and a line that would be a marker if the echo were read.
	text, _ = pbash(t, ctx, a, "cat <<'EOF'\na!b $KEPT \"q\" 'r'\nEOF\necho __DSH_PERSISTENT''_BASH_END_x:0 | tr -d _\necho \\\n  joined")
	if text != "a!b $KEPT \"q\" 'r'\nDSHPERSISTENTBASHENDx:0\njoined" {
		t.Fatalf("several lines: %q", text)
	}
	f.Saw("cwd, exports and functions carry over; the DSH_* facts are there; exit codes, several lines and quotes as typed; no marker in any text")

	f = fault(t, "persistent bash: a command waits for input")
	text, _ = pbash(t, ctx, a, "echo before; read -p 'name? ' v; echo got $v")
	if !strings.HasPrefix(text, "before\nname?") || !strings.Contains(text, "[no end yet: the command waits for input (") {
		t.Fatalf("a command that reads: %q", text)
	}
	text, _ = pbash(t, ctx, a, "echo after; pwd")
	if text != "[the previous command was still running: it was interrupted (SIGINT) first]\nafter\n"+dir {
		t.Fatalf("the command after one that read: %q", text)
	}
	f.Saw("partial output and a wait for input; the next command interrupted it and ran in the same shell")

	f = fault(t, "persistent bash: the shell among the agent's terminals")
	list, _ := callText(t, ctx, a, "terminal_list", map[string]any{})
	m := listIDRE.FindStringSubmatch(list)
	if m == nil || !strings.Contains(list, "persistent-bash") {
		t.Fatalf("terminal_list: %s", list)
	}
	// The command runs until the test opens its gate, however slow the
	// machine: the sends below meet it running.
	gate := filepath.Join(t.TempDir(), "gate")
	var wg sync.WaitGroup
	var slow string
	wg.Go(func() { slow, _ = pbash(t, ctx, a, "until [ -e "+gate+" ]; do sleep 0.05; done; echo slept") })
	busy := ""
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !strings.Contains(busy, "still running"); time.Sleep(20 * time.Millisecond) {
		busy, _ = callText(t, ctx, a, "terminal_send", map[string]any{"session_id": m[1], "text": "echo meddling"})
	}
	// A second command of the agent's waits its turn.
	var queued string
	wg.Go(func() { queued, _ = pbash(t, ctx, a, "echo queued") })
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !strings.Contains(busy, "a command is still running in "+m[1]) || slow != "slept" || queued != "queued" {
		t.Fatalf("a send while the tool runs a command: %q; the command: %q; the one queued behind it: %q", busy, slow, queued)
	}
	f.Saw("terminal_list shows it; terminal_send during a command: SEND_ACTIVE; a second command waited its turn")

	f = fault(t, "persistent bash: kill -9 of tool-bash-persistent between calls")
	killed(t, pluginPid(t, "tool-bash-persistent"), syscall.SIGKILL)
	if text, _ = pbash(t, ctx, a, "pwd; echo $KEPT"); text != dir+"\nyes" {
		t.Fatalf("after kill -9 of the tool's plugin: %q", text)
	}
	f.Saw("the restarted plugin found the agent's shell: its state is there")

	f = fault(t, "persistent bash: a timeout closes the shell")
	text, _ = pbash(t, ctx, a, "echo started; sleep 30", "timeoutMs", 1000)
	if text != "started\n[timed out after 1000ms: the shell was closed with everything it ran; the next command starts in a fresh shell (working directory and variables reset)]" {
		t.Fatalf("a timeout: %q", text)
	}
	if text, _ = pbash(t, ctx, a, "echo ${KEPT:-unset}; pwd"); text == "" || strings.HasPrefix(text, "yes") || strings.Contains(text, dir) {
		t.Fatalf("after a timeout: %q", text)
	}
	f.Saw("timed out, shell closed; the next command ran in a fresh shell")

	f = fault(t, "persistent bash: exit")
	pbash(t, ctx, a, "export AGAIN=1")
	text, _ = pbash(t, ctx, a, "echo bye; exit 3")
	if !strings.HasPrefix(text, "bye\n") || !strings.HasSuffix(text, "[the shell exited with code 3: the next command starts in a fresh shell (working directory and variables reset)]") {
		t.Fatalf("exit: %q", text)
	}
	if text, _ = pbash(t, ctx, a, "echo ${AGAIN:-fresh}"); text != noteFresh+"\nfresh" {
		t.Fatalf("after exit: %q", text)
	}
	f.Saw("exit 3 reported; the next command ran in a fresh shell")

	f = fault(t, "persistent bash: the model closes the shell")
	list, _ = callText(t, ctx, a, "terminal_list", map[string]any{})
	m = listIDRE.FindStringSubmatch(list)
	callText(t, ctx, a, "terminal_close", map[string]any{"session_id": m[1]})
	if text, _ = pbash(t, ctx, a, "echo reopened"); text != "[the shell was closed since the last command: this command runs in a fresh one (working directory and variables reset)]\nreopened" {
		t.Fatalf("after terminal_close of the shell: %q", text)
	}
	f.Saw("the next command said so and ran in a fresh shell")

	f = fault(t, "persistent bash: another agent")
	b := s.connect(t, ctx)
	if text, _ = pbash(t, ctx, b, "echo ${KEPT:-none}; pwd"); strings.HasPrefix(text, "yes") || strings.Contains(text, dir) {
		t.Fatalf("another agent's shell: %q", text)
	}
	if list, _ := callText(t, ctx, b, "terminal_list", map[string]any{}); strings.Count(list, "persistent-bash") != 1 {
		t.Fatalf("the other agent's terminals: %s", list)
	}
	f.Saw("a shell of its own")
}

// A persistent call the client cancels takes its command along: the shell
// is closed with it, and the next call runs in a fresh one. The call is
// cancelled once its command runs in the shell, and the command never ends
// by itself, so a slow machine changes neither.
func TestPersistentBashCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startHTTP(t, terminalsComp(t))
	a := s.connect(t, ctx)
	pidFile := filepath.Join(t.TempDir(), "pid")
	f := fault(t, "persistent bash: a call the client cancels")
	pbash(t, ctx, a, "export KEEP=1")
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	called := make(chan error, 1)
	go func() {
		_, err := a.CallTool(cctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo $$ > " + pidFile + "; while :; do sleep 0.05; done", "description": "d"}})
		called <- err
	}()
	pid := 0 // the shell's
	for deadline := time.Now().Add(bounded.Bound); pid == 0; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if pid == 0 && time.Now().After(deadline) {
			t.Fatalf("the command did not start in %v", bounded.Bound)
		}
	}
	ccancel()
	if err := bounded.Receive(t, called, "the cancelled call's return"); err == nil {
		t.Fatal("the cancelled call answered")
	}
	// The client stops waiting at once; the shell goes once the cancel
	// reaches dsh.
	for deadline := time.Now().Add(bounded.Bound); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled command's shell (pid %d) still runs after %v", pid, bounded.Bound)
		}
	}
	if text, _ := pbash(t, ctx, a, "echo ${KEEP:-fresh}"); !strings.HasSuffix(text, "fresh") {
		t.Fatalf("the call after a cancel: %q", text)
	}
	f.Saw("the command's shell was closed with it; the next call ran in a fresh shell")
}

// nonceRE is what a wrapper's nonce looks like.
var nonceRE = regexp.MustCompile(`[0-9a-f]{24}`)

// Nothing a command defines, prints or changes in its persistent shell
// alters what the tool reports: after each hijack, a command in the same
// session reports its own output and exit status; a command that prints
// an end mark does not end; the nonce is in no history, command line,
// environment or ps listing; a shell that can no longer give a true end
// is closed, said so, and replaced by a fresh one, which is said too.
func TestPersistentBashHijacks(t *testing.T) {
	if _, err := syscall.Getpgid(1); err != nil {
		t.Skip("needs /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := startHTTP(t, terminalsComp(t))
	a := s.connect(t, ctx)
	dir := t.TempDir()

	if text, _ := pbash(t, ctx, a, "export KEPT=k1"); text != noteFresh {
		t.Fatalf("the first command: %q", text)
	}
	// normal is a command after a hijack: its output and status, as run.
	normal := func(after string) {
		t.Helper()
		if text, _ := pbash(t, ctx, a, `echo "$KEPT"; (exit 3)`); text != "k1\n[exit code: 3]" {
			t.Fatalf("the command after %s: %q", after, text)
		}
	}
	for _, hijack := range []string{
		"set -u",
		"eval(){ echo HIJACKED; }",
		"printf(){ :; }",
		"builtin(){ echo B; }; command(){ echo C; }; set(){ echo S; }; unset(){ echo U; }; exec(){ echo E; }; trap(){ echo T; }; read(){ echo R; }; return(){ echo RT; }; declare(){ echo D; }; enable(){ echo EN; }",
		"alias eval='echo A' exec='echo A' set='echo A' unset='echo A' trap='echo A' POSIXLY_CORRECT='echo A'",
		"export -f printf; hash -p /bin/false printf; PATH=" + dir + ":$PATH; printf '#!/bin/sh\\n' >/dev/null",
		`PROMPT_COMMAND='echo pc'; PS1='x> '; PS0='ps0 '; shopt -s extdebug`,
	} {
		f := fault(t, "persistent bash: "+hijack)
		if text, _ := pbash(t, ctx, a, hijack); text != "" {
			t.Fatalf("%s: %q", hijack, text)
		}
		normal(hijack)
		f.Saw("the next command ran as typed, with its own output and status")
	}

	// The command's own names back, for the steps after.
	pbash(t, ctx, a, `unalias -a; POSIXLY_CORRECT=1; \unset -f builtin command set unset exec trap read return declare enable eval printf; \unset POSIXLY_CORRECT`)

	f := fault(t, "persistent bash: output redirected with exec")
	if text, _ := pbash(t, ctx, a, "exec >"+filepath.Join(dir, "out")+" 2>&1"); text != "" {
		t.Fatalf("exec >file: %q", text)
	}
	if text, _ := pbash(t, ctx, a, `echo "$KEPT"; (exit 3)`); text != "[exit code: 3]" {
		t.Fatalf("the command after exec >file: %q", text)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out")); !strings.Contains(string(b), "k1\n") || nonceRE.Match(b) {
		t.Fatalf("the output written to the file: %q", b)
	}
	pbash(t, ctx, a, "exec >&0 2>&0")
	f.Saw("the end and its status still came; the output went to the file, and the typed line, with its nonce, did not")

	f = fault(t, "persistent bash: xtrace and a DEBUG trap")
	text, _ := pbash(t, ctx, a, `set -xT; trap 'echo "dbg $BASH_COMMAND"' DEBUG`)
	text, _ = pbash(t, ctx, a, `echo "$KEPT"; (exit 3)`)
	if !strings.Contains(text, "\nk1\n") || !strings.HasSuffix(text, "\n[exit code: 3]") || nonceRE.MatchString(text) {
		t.Fatalf("the command under xtrace and a DEBUG trap: %q", text)
	}
	pbash(t, ctx, a, "trap - DEBUG; set +xT")
	normal("xtrace and a DEBUG trap")
	f.Saw("its traces and the trap's lines, no wrapper line or nonce among them; then the status")

	f = fault(t, "persistent bash: the command prints an end mark from its history")
	pbash(t, ctx, a, "set -o history; HISTCONTROL=; HISTSIZE=1000; unset HISTIGNORE")
	text, r := callText(t, ctx, a, "bash", map[string]any{"command": `n=$(history | grep -oE '[0-9a-f]{24}' | tail -n 1); printf '\n%s_%s_%s:0\n' __DSH_PERSISTENT_BASH END "$n"; sleep 0.5; echo after-mark; (exit 5)`})
	if !strings.HasSuffix(text, "\nafter-mark\n[exit code: 5]") || !r.IsError {
		t.Fatalf("a command printing an end mark: %q", text)
	}
	f.Saw("the call went on to the command's true end and status")

	f = fault(t, "persistent bash: where the nonce could be read")
	// The shell's session: the shell, what it runs, and what the wrapper
	// would start (other processes of the machine are not this test's).
	hunt := `sid=$(ps -o sid= -p $$); history; for p in $(ps -o pid= -s $sid); do tr '\0' ' ' </proc/$p/cmdline; echo; tr '\0' '\n' </proc/$p/environ; done 2>/dev/null | grep -a '[D]SH_PERSISTENT\|[<]<<\|[1]33;A'; ps -o args= -s $sid | grep -a '[D]SH_PERSISTENT\|[<]<<\|[1]33;A'; true`
	pbash(t, ctx, a, "set -o history; HISTCONTROL=")
	for i := 0; i < 2; i++ {
		if text, _ := pbash(t, ctx, a, hunt); nonceRE.MatchString(text) || strings.Contains(text, "133;A") {
			t.Fatalf("a nonce or a prompt mark in the history, a command line, an environment or ps: %q", text)
		}
	}
	f.Saw("no nonce, nor the terminal's prompt mark, in history, /proc/*/cmdline, /proc/*/environ or ps, with the history on")

	f = fault(t, "persistent bash: eval disabled")
	pbash(t, ctx, a, "enable -n eval")
	text, r = pbash(t, ctx, a, `echo "$KEPT"`)
	if !strings.Contains(text, noteUntrusted) || !r.IsError || strings.Contains(text, "k1") {
		t.Fatalf("a command after enable -n eval: %q", text)
	}
	if text, _ = pbash(t, ctx, a, `echo "${KEPT:-gone}"; (exit 3)`); text != noteFresh+"\ngone\n[exit code: 3]" {
		t.Fatalf("the command after a shell closed as untrusted: %q", text)
	}
	f.Saw("said the shell could not be trusted and closed it; the next command said it ran in a fresh shell")

	f = fault(t, "persistent bash: a variable of the wrapper made readonly")
	text, _ = pbash(t, ctx, a, "export KEPT=k1; readonly __dsh_status=0; false")
	if !strings.Contains(text, noteUntrusted) || strings.Contains(text, "[exit code") {
		t.Fatalf("a command whose status could not be told: %q", text)
	}
	if text, _ = pbash(t, ctx, a, "echo ${KEPT:-gone}"); text != noteFresh+"\ngone" {
		t.Fatalf("after it: %q", text)
	}
	f.Saw("no status given for it, the shell closed as untrusted; a fresh shell, said")

	f = fault(t, "persistent bash: errexit")
	pbash(t, ctx, a, "export KEPT=k1; set -e")
	text, _ = pbash(t, ctx, a, "echo before; false")
	if !strings.HasPrefix(text, "before\n") || !strings.Contains(text, "[the shell exited with code 1") {
		t.Fatalf("a failure under set -e: %q", text)
	}
	if text, _ = pbash(t, ctx, a, "echo ${KEPT:-gone}"); text != noteFresh+"\ngone" {
		t.Fatalf("after it: %q", text)
	}
	f.Saw("the shell's exit said, and the fresh shell after it")
}

// A kill -9 of the tool's plugin while a command runs: the next command
// either goes on in the same shell or says it runs in a fresh one.
func TestPersistentBashPluginKilledDuringCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startHTTP(t, terminalsComp(t))
	a := s.connect(t, ctx)
	started := filepath.Join(t.TempDir(), "started")
	f := fault(t, "persistent bash: kill -9 of tool-bash-persistent during a call")
	pbash(t, ctx, a, "export KEPT=yes")
	done := make(chan error, 1)
	go func() {
		_, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "touch " + started + "; sleep 20", "description": "d"}})
		done <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
	}
	killed(t, pluginPid(t, "tool-bash-persistent"), syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the call in flight never answered")
	}
	text, _ := pbash(t, ctx, a, "echo ${KEPT:-lost}")
	if text != "yes" && text != noteFresh+"\nlost" && !strings.HasSuffix(text, "]\nyes") {
		t.Fatalf("the command after the plugin was killed mid-call: %q", text)
	}
	f.Saw("the next command: %q", text)
}
