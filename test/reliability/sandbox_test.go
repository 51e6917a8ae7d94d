//go:build linux

package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testneeds"
)

// sandboxComp serves bash-sandbox under a policy rooted at ws, with an
// approval rule that lets escalations of "touch *" through.
func sandboxComp(ws, mode, extra string) string {
	return fmt.Sprintf(`sandbox:
  defaultMode: %s
  workspaceRoot: %s
%sapproval:
  rules:
    - {match: "touch *", mode: danger-full-access, decision: allow}
  otherwise: deny
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-sandbox
  - id: tools
    name: tool-bash
`, mode, ws, extra)
}

// mustNotExist fails the test if path exists.
// userGit makes dir a repository, as its user would outside the sandbox.
func userGit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q", "."}, {"config", "user.email", "a@b"}, {"config", "user.name", "a"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

func mustNotExist(t *testing.T, what, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Fatalf("%s: %s exists: the sandbox let it through", what, path)
	}
}

// deniedWrite: the error of a write the sandbox refused (Landlock's, or
// the read-only mount's, which comes first).
func deniedWrite(text string) bool {
	return strings.Contains(text, "Permission denied") || strings.Contains(text, "Read-only file system")
}

// A session under bash-sandbox through the real binaries: what a denial
// looks like to the model and in the facts, then every way a call ends
// (a denial, a timeout, a kill of a job, an approved escalation, a refused
// one) followed by commands that still run confined.
func TestSandboxSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	ws, outside := t.TempDir(), outsideTmp(t)
	userGit(t, ws)
	s := startServe(t, ctx, sandboxComp(ws, "workspace-write", ""))

	f := fault(t, "sandbox: a write outside the workspace")
	target := filepath.Join(outside, "escaped")
	text, facts := s.tool(t, ctx, "bash", map[string]any{"command": "echo x > " + target, "workdir": ws})
	if !strings.Contains(text, "[sandbox: file access denied under workspace-write mode]") || !deniedWrite(text) {
		t.Fatalf("a denied write: %q", text)
	}
	sb, _ := facts["sandbox"].(map[string]any)
	if sb["denied"] != true || sb["mode"] != "workspace-write" || !strings.Contains(fmt.Sprint(sb["deniedPaths"]), target) || !strings.HasPrefix(fmt.Sprint(sb["enforcement"]), "landlock") {
		t.Fatalf("the facts of a denial: %v", facts["sandbox"])
	}
	mustNotExist(t, "a write outside", target)
	f.Saw("%q; facts %v", text, sb)

	// Inside the workspace everything works, git included; the facts say
	// no denial.
	text, facts = s.tool(t, ctx, "bash", map[string]any{"workdir": ws, "command": "echo v1 > a && mkdir d && mv a d/b && git add -A && git commit -qm one && git log --oneline | wc -l"})
	if sb, _ := facts["sandbox"].(map[string]any); !strings.HasSuffix(text, "1") || sb["denied"] != false {
		t.Fatalf("git in the workspace: %q %v", text, facts["sandbox"])
	}

	// The repository's config and hooks stay as they were, even renamed
	// away.
	before, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
	for _, cmd := range []string{"echo '[core]' >> .git/config", "echo x > .git/hooks/pre-commit", "mv .git g2 && mkdir .git && echo x > .git/config"} {
		text, _ := s.tool(t, ctx, "bash", map[string]any{"workdir": ws, "command": cmd})
		if !strings.Contains(text, "[sandbox: file access denied under workspace-write mode]") {
			t.Fatalf("%s: %q", cmd, text)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(after) != string(before) {
		t.Fatalf(".git/config changed: %q", after)
	}
	mustNotExist(t, "a hook", filepath.Join(ws, ".git", "hooks", "pre-commit"))
	mustNotExist(t, "a renamed .git", filepath.Join(ws, "g2"))

	// A repository made inside keeps its history, not what git would run
	// from it; an .envrc made inside is undone; both are said.
	text, facts = s.tool(t, ctx, "bash", map[string]any{"workdir": ws, "command": "git init -q fresh && git -C fresh commit --allow-empty -qm x && echo 'echo hi' > .envrc && echo made"})
	sb, _ = facts["sandbox"].(map[string]any)
	if !strings.Contains(text, "[sandbox: file access denied under workspace-write mode]") || sb["denialSource"] != "undone" ||
		!strings.Contains(fmt.Sprint(sb["deniedPaths"]), filepath.Join(ws, "fresh", ".git", "config")) || !strings.Contains(fmt.Sprint(sb["deniedPaths"]), filepath.Join(ws, ".envrc")) {
		t.Fatalf("a repository and an .envrc made inside: %q %v", text, sb)
	}
	mustNotExist(t, "a new repository's config", filepath.Join(ws, "fresh", ".git", "config"))
	mustNotExist(t, "a new repository's hooks", filepath.Join(ws, "fresh", ".git", "hooks"))
	mustNotExist(t, "an .envrc", filepath.Join(ws, ".envrc"))
	if out, err := exec.Command("git", "-C", filepath.Join(ws, "fresh"), "log", "--oneline").CombinedOutput(); err != nil || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("the new repository lost its history: %v %s", err, out)
	}
	f.Saw("git init inside: %v", sb["deniedPaths"])

	// A background command's leftovers are undone when it has ended, and
	// its read says so.
	started, _ := s.tool(t, ctx, "bash", map[string]any{"workdir": ws, "command": "echo 'echo hi' > .envrc; echo bg", "run_in_background": true})
	jid := jobID(started)
	var bgRead string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(bgRead, "finished"); time.Sleep(50 * time.Millisecond) {
		more, _ := s.tool(t, ctx, "job_output", map[string]any{"job_id": jid})
		if time.Now().After(deadline) {
			t.Fatalf("the background job did not end: %q", bgRead)
		}
		bgRead += more
	}
	if !strings.Contains(bgRead, "[sandbox: file access denied under workspace-write mode]") {
		t.Fatalf("a background .envrc: %q", bgRead)
	}
	mustNotExist(t, "a background .envrc", filepath.Join(ws, ".envrc"))
	f.Saw("background: %q", bgRead)

	f = fault(t, "sandbox: a timeout, then a job killed, then the next commands")
	text, _ = s.tool(t, ctx, "bash", map[string]any{"command": "sleep 30", "timeoutMs": 300})
	if !strings.Contains(text, "[timed out after 300ms]") {
		t.Fatalf("a timeout: %q", text)
	}
	out, _ := s.bash(t, ctx, map[string]any{"command": "sleep 1; echo y > " + filepath.Join(outside, "from-job") + "; sleep 600", "run_in_background": true})
	id := jobID(out)
	if id == "" {
		t.Fatalf("no job id in %q", out)
	}
	var read string
	for deadline := time.Now().Add(30 * time.Second); !deniedWrite(read); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job's denial never showed: %q", read)
		}
		r, _ := s.tool(t, ctx, "job_output", map[string]any{"job_id": id})
		read += r
	}
	if !strings.Contains(read, "[sandbox: file access denied under workspace-write mode]") {
		t.Fatalf("a job's denial: %q", read)
	}
	if text, _ := s.tool(t, ctx, "job_kill", map[string]any{"job_id": id}); !strings.Contains(text, "killed") {
		t.Fatalf("job_kill: %q", text)
	}
	mustNotExist(t, "a job's write outside", filepath.Join(outside, "from-job"))
	s.commandsRun(t, ctx, 3)
	f.Saw("timeout, job denial %q, kill, 3 commands after", lastLine(read))

	f = fault(t, "sandbox: escalation refused, then approved for one run")
	text, isErr := s.bash(t, ctx, map[string]any{"command": "rm -rf " + outside, "sandbox_permissions": "danger-full-access", "justification": "clean up"})
	if !isErr || !strings.Contains(text, "denied") || !strings.Contains(text, "nothing was run") {
		t.Fatalf("a refused escalation: %q", text)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a refused escalation ran: %v", err)
	}
	approved := filepath.Join(outside, "approved")
	text, isErr = s.bash(t, ctx, map[string]any{"command": "touch " + approved, "sandbox_permissions": "danger-full-access", "justification": "the test needs it"})
	if isErr {
		t.Fatalf("an approved escalation: %q", text)
	}
	if _, err := os.Stat(approved); err != nil {
		t.Fatalf("an approved escalation did not run unconfined: %q %v", text, err)
	}
	// The approval covered that one run.
	again := filepath.Join(outside, "again")
	text, _ = s.bash(t, ctx, map[string]any{"command": "touch " + again})
	if !strings.Contains(text, "[sandbox: file access denied") {
		t.Fatalf("the run after an approved one: %q", text)
	}
	mustNotExist(t, "the run after an approval", again)
	s.commandsRun(t, ctx, 3)
	f.Saw("refused, approved once, confined again")

	f = fault(t, "sandbox: kill -9 of bash-sandbox with a confined job running")
	out, _ = s.bash(t, ctx, map[string]any{"command": "sleep 2; echo late > " + filepath.Join(outside, "late") + "; echo done", "run_in_background": true})
	id = jobID(out)
	killed(t, pluginPid(t, "bash-sandbox"), syscall.SIGKILL)
	// The restarted executor confines as before.
	late := filepath.Join(outside, "after-restart")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		text, _ := s.bash(t, ctx, map[string]any{"command": "touch " + late})
		if strings.Contains(text, "[sandbox: file access denied under workspace-write mode]") {
			break
		}
		if time.Now().After(deadline) || (!strings.Contains(text, "restart") && !strings.Contains(text, "exited") && !strings.Contains(text, "not provided") && !strings.Contains(text, "gone")) {
			t.Fatalf("after the executor's kill: %q", text)
		}
	}
	mustNotExist(t, "a write after the executor's restart", late)
	// The job outlived its executor, still confined.
	read = ""
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(read, "finished"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job never finished: %q", read)
		}
		r, _ := s.tool(t, ctx, "job_output", map[string]any{"job_id": id})
		read += r
	}
	if !strings.Contains(read, "done") || !strings.Contains(read, "[sandbox: file access denied under workspace-write mode]") {
		t.Fatalf("the job across the kill: %q", read)
	}
	mustNotExist(t, "a job's write after its executor died", filepath.Join(outside, "late"))
	s.commandsRun(t, ctx, 3)
	f.Saw("restarted confined; the job finished confined: %q", lastLine(read))
}

// A workspace that is gone before the first command: the runner cannot
// confine, the model is told, nothing runs, and nothing runs unconfined.
func TestSandboxUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, outside := t.TempDir(), outsideTmp(t)
	s := startServe(t, ctx, sandboxComp(ws, "workspace-write", ""))
	f := fault(t, "sandbox: the workspace removed, so nothing can be confined")
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(outside, "ran")
	for i := 0; i < 2; i++ {
		text, isErr := s.bash(t, ctx, map[string]any{"command": "touch " + marker, "workdir": outside})
		if !isErr || !strings.Contains(text, "the sandbox cannot confine commands here, so nothing was run") || strings.Contains(text, "rpc error") {
			t.Fatalf("an unavailable sandbox: %q", text)
		}
		mustNotExist(t, "a command the sandbox could not confine", marker)
		f.Saw("%q", text)
	}
	out, isErr := s.bash(t, ctx, map[string]any{"command": "touch " + marker, "workdir": outside, "run_in_background": true})
	if !isErr || !strings.Contains(out, "nothing was run") {
		t.Fatalf("an unavailable sandbox, in the background: %q", out)
	}
	mustNotExist(t, "a background command the sandbox could not confine", marker)
}

// read-only: nothing is writable, the workspace included.
func TestSandboxReadOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := t.TempDir()
	s := startServe(t, ctx, sandboxComp(ws, "read-only", ""))
	text, _ := s.bash(t, ctx, map[string]any{"command": "cat /etc/hostname >/dev/null && echo read ok; touch f", "workdir": ws})
	if !strings.Contains(text, "read ok") || !strings.Contains(text, "[sandbox: file access denied under read-only mode]") {
		t.Fatalf("read-only: %q", text)
	}
	mustNotExist(t, "a write under read-only", filepath.Join(ws, "f"))
	s.commandsRun(t, ctx, 2)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// A policy edit on hot reload: the executor and the tool reload, the bash
// tool's description says the new mode, the client hears
// tools/list_changed, and commands run under the new mode.
func TestSandboxPolicyEdit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ws := t.TempDir()
	s := startServe(t, ctx, sandboxComp(ws, "workspace-write", ""))
	describes := func(mode string) bool {
		r, err := s.cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range r.Tools {
			if tool.Name == "bash" {
				return strings.Contains(tool.Description, "Commands run in a "+mode+" sandbox")
			}
		}
		return false
	}
	if !describes("workspace-write") {
		t.Fatal("the bash tool does not say its sandbox mode")
	}
	f := fault(t, "sandbox: the policy edited to read-only while serving")
	heard := s.listChanged.Load()
	if err := os.WriteFile(s.file, []byte(sandboxComp(ws, "read-only", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !describes("read-only"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the description never said read-only\n%s", s.stderr)
		}
	}
	// The notification and the list are two messages: the list may be read
	// before the notification comes in.
	for deadline := time.Now().Add(10 * time.Second); s.listChanged.Load() == heard; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the description changed without a tools/list_changed")
		}
	}
	text, _ := s.bash(t, ctx, map[string]any{"command": "touch f", "workdir": ws})
	if !strings.Contains(text, "[sandbox: file access denied under read-only mode]") {
		t.Fatalf("a write in the workspace under read-only: %q", text)
	}
	mustNotExist(t, "a write under the edited policy", filepath.Join(ws, "f"))
	s.commandsRun(t, ctx, 2)
	f.Saw("description and runs follow the edit: %q", lastLine(text))
}

// The same session under the bubblewrap runner: a denial, work and git in
// the workspace, a timeout, the next commands.
func TestSandboxBubblewrapSession(t *testing.T) {
	testneeds.Command(t, "bwrap")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ws, outside := t.TempDir(), outsideTmp(t)
	userGit(t, ws)
	s := startServe(t, ctx, sandboxComp(ws, "workspace-write", "  runner: bubblewrap\n"))
	f := fault(t, "sandbox (bubblewrap): a write outside, then git, a timeout, the next commands")
	target := filepath.Join(outside, "escaped")
	text, facts := s.tool(t, ctx, "bash", map[string]any{"command": "echo x > " + target, "workdir": ws})
	sb, _ := facts["sandbox"].(map[string]any)
	if !strings.Contains(text, "[sandbox: file access denied under workspace-write mode]") || sb["enforcement"] != "bubblewrap: bubblewrap,seccomp" {
		t.Fatalf("a denied write: %q %v", text, sb)
	}
	mustNotExist(t, "a write outside", target)
	text, _ = s.tool(t, ctx, "bash", map[string]any{"workdir": ws, "command": "echo v1 > a && git add -A && git commit -qm one && git log --oneline | wc -l"})
	if !strings.HasSuffix(text, "1") {
		t.Fatalf("git in the workspace: %q", text)
	}
	if text, _ := s.tool(t, ctx, "bash", map[string]any{"command": "echo x > .git/config", "workdir": ws}); !strings.Contains(text, "[sandbox: file access denied") {
		t.Fatalf("a protected path: %q", text)
	}
	if text, _ := s.tool(t, ctx, "bash", map[string]any{"command": "echo 'echo hi' > .envrc", "workdir": ws}); !strings.Contains(text, "[sandbox: file access denied") {
		t.Fatalf("an .envrc made inside: %q", text)
	}
	mustNotExist(t, "an .envrc", filepath.Join(ws, ".envrc"))
	if text, _ := s.tool(t, ctx, "bash", map[string]any{"command": "sleep 30", "timeoutMs": 300}); !strings.Contains(text, "[timed out after 300ms]") {
		t.Fatalf("a timeout: %q", text)
	}
	s.commandsRun(t, ctx, 3)
	f.Saw("denied, git works, .git/config refused, timeout, 3 commands after")
}

// Terminals under a sandbox section are fenced like commands: the
// persistent shell and a terminal_open'd one write in the workspace and
// nowhere else, and stay confined after kill -9 of their backend.
func TestSandboxedTerminals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	ws, outside := t.TempDir(), outsideTmp(t)
	s := startHTTP(t, fmt.Sprintf(`sandbox:
  defaultMode: workspace-write
  workspaceRoot: %s
plugins:
  - id: env
    name: shell-env
  - id: term-bash
    name: terminal-bash
    config:
      cwd: %s
  - id: terminal-tools
    name: tool-terminal
  - id: persistent-bash
    name: tool-bash-persistent
`, ws, ws))
	a := s.connect(t, ctx)

	f := fault(t, "sandboxed terminals: the persistent shell")
	escaped := filepath.Join(outside, "escaped")
	text, _ := pbash(t, ctx, a, "touch inside && echo wrote; touch "+escaped)
	if !strings.HasPrefix(text, noteFresh+"\nwrote\n") || !deniedWrite(text) || !strings.HasSuffix(text, "[exit code: 1]") {
		t.Fatalf("the persistent shell, confined: %q", text)
	}
	mustNotExist(t, "a write from the persistent shell", escaped)
	if _, err := os.Stat(filepath.Join(ws, "inside")); err != nil {
		t.Fatalf("the write in the workspace: %v", err)
	}
	f.Saw("%q", text)

	f = fault(t, "sandboxed terminals: terminal_open, then kill -9 of terminal-bash")
	id := openTerm(t, ctx, a)
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "touch " + escaped + "; echo done-$?"})
	expect(t, "a terminal, confined", text, "done-1", "[wait: stdin_read — ")
	mustNotExist(t, "a write from a terminal", escaped)
	killed(t, pluginPid(t, "terminal-bash"), syscall.SIGKILL)
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "touch " + escaped + "2; echo again-$?"})
	expect(t, "the same terminal after kill -9 of its backend", text, "again-1")
	id2 := openTerm(t, ctx, a)
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id2, "text": "touch " + escaped + "3; echo fresh-$?"})
	expect(t, "a terminal opened by the restarted backend", text, "fresh-1")
	for _, p := range []string{escaped + "2", escaped + "3"} {
		mustNotExist(t, "a write from a terminal", p)
	}
	f.Saw("writes outside refused before and after the backend's restart")
}

// Hooks run as commands of the composed executor: under bash-sandbox a
// hook is confined like the command it guards.
func TestClaudeHooksConfined(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, outside := t.TempDir(), outsideTmp(t)
	writeSettings(t, ws, map[string]any{"PreToolUse": []any{group("Bash",
		cmdHook("touch "+filepath.Join(ws, "hook-inside")+" && touch "+filepath.Join(outside, "hook-escaped")))}})
	s := startServe(t, ctx, fmt.Sprintf(`sandbox:
  defaultMode: workspace-write
  workspaceRoot: %s
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-sandbox
  - id: tools
    name: tool-bash
  - id: hooks
    name: hooks-claude-code
    config: {projectDir: %s, settingsFiles: [.claude/settings.json]}
`, ws, ws))
	f := fault(t, "sandbox: a hook under bash-sandbox")
	text, _ := s.tool(t, ctx, "bash", map[string]any{"command": "echo guarded", "workdir": ws})
	if text != "guarded" {
		t.Fatalf("the call: %q", text)
	}
	if _, err := os.Stat(filepath.Join(ws, "hook-inside")); err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	mustNotExist(t, "a hook's write outside the workspace", filepath.Join(outside, "hook-escaped"))
	f.Saw("the hook ran confined: its write in the workspace landed, the one outside was refused")
}
