//go:build linux

package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
)

// claudeComp serves tool-bash with hooks-claude-code reading the settings
// file of project (and only it: never the user's own).
func claudeComp(project, extra string) string {
	return fmt.Sprintf(`%splugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
  - id: hooks
    name: hooks-claude-code
    config:
      projectDir: %s
      settingsFiles: [.claude/settings.json]
`, extra, project)
}

// writeSettings writes project's .claude/settings.json holding hooks.
func writeSettings(t *testing.T, project string, hooks map[string]any) {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"hooks": hooks}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(project, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, ".claude", "settings.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// script writes an executable hook script and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func cmdHook(command string, timeout ...int) map[string]any {
	h := map[string]any{"type": "command", "command": command}
	if len(timeout) > 0 {
		h["timeout"] = timeout[0]
	}
	return h
}

func group(matcher string, hooks ...map[string]any) map[string]any {
	return map[string]any{"matcher": matcher, "hooks": hooks}
}

// The bounds of the hooks below: the guard's timeout is long enough for a
// Python start on a loaded machine, and the slow hook outlasts it by far,
// so a cut at the timeout is told from a run to the end by the clock.
// Two stamp hooks in parallel start well within stampSleep of each other;
// one after the other, stampSleep apart at least.
const (
	guardTimeout = 20 * time.Second
	slowHook     = 60 * time.Second
	stampSleep   = 2 * time.Second
)

// The hooks of a Claude Code settings file guard a session's bash calls,
// each way a hook can answer, one call after another.
func TestClaudeHooks(t *testing.T) {
	testneeds.Command(t, "python3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	project, logs := t.TempDir(), t.TempDir()
	// The payload's cwd is where the commands run: the folder dsh was
	// started in (this test's), not the project.
	wd, werr := os.Getwd()
	if werr != nil {
		t.Fatal(werr)
	}
	t.Setenv("WANT_CWD", wd)
	// The guard checks its own payload, then decides by the command.
	guard := script(t, logs, "guard.py", `#!/usr/bin/env python3
import json, os, sys
d = json.load(sys.stdin)
need = ["session_id", "transcript_path", "cwd", "permission_mode", "hook_event_name", "tool_name", "tool_input", "tool_use_id"]
missing = [k for k in need if k not in d]
if missing or d["hook_event_name"] != "PreToolUse" or d["tool_name"] != "Bash" or not d["tool_use_id"].startswith("toolu_") \
        or os.environ.get("CLAUDE_PROJECT_DIR") != os.getcwd() or os.path.realpath(d["cwd"]) != os.path.realpath(os.environ["WANT_CWD"]) \
        or d["permission_mode"] != "default" or sorted(d["tool_input"]) != ["command", "description"]:
    print("bad payload: missing %s in %s (CLAUDE_PROJECT_DIR=%s, run in %s)" % (missing, d, os.environ.get("CLAUDE_PROJECT_DIR"), os.getcwd()), file=sys.stderr)
    sys.exit(2)
c = d["tool_input"]["command"]
def out(o):
    print(json.dumps(o)); sys.exit(0)
if "rm -rf" in c:
    print("rm -rf is not allowed in this project", file=sys.stderr); sys.exit(2)
if c.startswith("git push"):
    out({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no pushes from the agent"}})
if c.startswith("echo old"):
    out({"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": c.replace("echo old", "echo rewritten", 1)}}})
if c.startswith("echo ask"):
    out({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "asks first"}})
if c.startswith("echo stop"):
    out({"continue": False, "stopReason": "the session is frozen"})
if c.startswith("echo crash"):
    raise SystemExit("crashed on purpose")
if c.startswith("echo slow"):
    import time; time.sleep(`+fmt.Sprint(slowHook.Seconds())+`)
out({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}, "systemMessage": "allowed"})
`)
	post := script(t, logs, "post.sh", `#!/bin/bash
cat > "`+logs+`/post-$$.json"
exit 0
`)
	stamp := script(t, logs, "stamp.sh", `#!/bin/bash
date +%s.%N >> "`+logs+`/stamps-$1"
sleep `+fmt.Sprint(stampSleep.Seconds())+`
`)
	writeSettings(t, project, map[string]any{
		"PreToolUse": []any{
			group("Bash", cmdHook(guard, int(guardTimeout.Seconds()))),
			// Matchers: a regex that takes bash, names that do not.
			group("B.sh", cmdHook(stamp+" a"), cmdHook(stamp+" b")),
			group("Edit|mcp__dsh__job_output", cmdHook("echo never >> "+logs+"/never")),
			// The same command under two matchers runs once.
			group("*", cmdHook("echo once >> "+logs+"/once")),
			group("", cmdHook("echo once >> "+logs+"/once")),
		},
		"PostToolUse": []any{group("Bash", cmdHook(post))},
	})
	s := startServe(t, ctx, claudeComp(project, ""))
	run := func(command string) string {
		text, _ := s.bash(t, ctx, map[string]any{"command": command})
		return text
	}

	f := fault(t, "claude hooks: exit 2 blocks")
	marker := filepath.Join(logs, "should-not-exist")
	if text := run("rm -rf " + marker + " && touch " + marker); text != "[denied by hook: rm -rf is not allowed in this project]" {
		t.Fatalf("exit 2: %q", text)
	}
	f.Saw("%q", run("rm -rf /nonexistent-dir"))

	// Stages the hooks decide by the command alone, in this order in the
	// session; prefix: the text starts with want.
	for _, st := range []struct {
		stage, command, want string
		prefix               bool
		saw                  string
	}{
		{stage: "a JSON deny", command: "git push origin main", want: "[denied by hook: no pushes from the agent]", saw: "denied with its reason"},
		{stage: "updatedInput rewrites the command", command: "echo old words", want: "rewritten words", saw: "ran the rewritten command"},
		{stage: "ask with no approval section", command: "echo ask me", prefix: true,
			want: "[denied by hook: asks first — the user's approval was needed: denied: the composition has no approval section", saw: "denied, saying why"},
		{stage: "continue false", command: "echo stop now", want: "[stopped by hook: the session is frozen]", saw: "stopped with its reason"},
	} {
		f = fault(t, "claude hooks: "+st.stage)
		text := run(st.command)
		if text != st.want && !(st.prefix && strings.HasPrefix(text, st.want)) {
			t.Fatalf("%s: %q", st.stage, text)
		}
		f.Saw("%s", st.saw)
	}

	f = fault(t, "claude hooks: a hook that crashes, one that times out")
	if text := run("echo crash test"); text != "crash test" {
		t.Fatalf("after a crashing hook: %q", text)
	}
	start := time.Now()
	// Cut at its timeout, well before its own end.
	if text := run("echo slow test"); text != "slow test" || time.Since(start) > (guardTimeout+slowHook)/2 {
		t.Fatalf("after a hook that timed out (%v of its %v): %q in %v", guardTimeout, slowHook, text, time.Since(start))
	}
	f.Saw("neither blocks (Claude Code's rule); the slow one was cut at its timeout")

	f = fault(t, "claude hooks: a call cancelled while its hook runs")
	cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := s.cs.CallTool(cctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo slow cancelled", "description": "d"}})
	ccancel()
	cancelled := time.Now()
	if err == nil {
		t.Fatal("the cancelled call answered")
	}
	start = time.Now()
	// Not held behind the cancelled call's hook, which would run to its
	// timeout.
	if text := run("echo after the cancel"); text != "after the cancel" || time.Since(start) > guardTimeout {
		t.Fatalf("the call after a cancel: %q in %v", text, time.Since(start))
	}
	// Gone well before its own timeout would have ended it.
	for deadline := cancelled.Add(guardTimeout / 2); ; time.Sleep(50 * time.Millisecond) {
		if out, _ := exec.Command("pgrep", "-f", guard).Output(); len(out) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled call's hook still runs")
		}
	}
	f.Saw("the next call ran at once, and the hook of the cancelled one was gone")

	f = fault(t, "claude hooks: PostToolUse gets the output; matchers; parallel; once")
	for _, p := range []string{"post-*.json", "stamps-*", "once"} {
		matches, _ := filepath.Glob(filepath.Join(logs, p))
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
	if text := run("echo to-the-post-hook; echo err >&2"); !strings.HasPrefix(text, "to-the-post-hook") {
		t.Fatalf("a call: %q", text)
	}
	posts, _ := filepath.Glob(filepath.Join(logs, "post-*.json"))
	if len(posts) != 1 {
		t.Fatalf("PostToolUse ran %d times", len(posts))
	}
	var got struct {
		Event    string `json:"hook_event_name"`
		Response struct {
			Stdout, Stderr string
			ExitCode       *int `json:"exit_code"`
		} `json:"tool_response"`
	}
	b, _ := os.ReadFile(posts[0])
	if err := json.Unmarshal(b, &got); err != nil || got.Event != "PostToolUse" || got.Response.Stdout != "to-the-post-hook" || got.Response.Stderr != "err" || got.Response.ExitCode == nil || *got.Response.ExitCode != 0 {
		t.Fatalf("what PostToolUse read: %s", b)
	}
	if _, err := os.Stat(filepath.Join(logs, "never")); err == nil {
		t.Fatal("a hook whose matcher names other tools ran for bash")
	}
	if b, _ := os.ReadFile(filepath.Join(logs, "once")); string(b) != "once\n" {
		t.Fatalf("the same command under two matchers: %q", b)
	}
	sa, _ := os.ReadFile(filepath.Join(logs, "stamps-a"))
	sb, _ := os.ReadFile(filepath.Join(logs, "stamps-b"))
	ta, _ := strconv.ParseFloat(strings.TrimSpace(string(sa)), 64)
	tb, _ := strconv.ParseFloat(strings.TrimSpace(string(sb)), 64)
	if within := stampSleep.Seconds() * 3 / 4; ta == 0 || tb == 0 || ta-tb > within || tb-ta > within {
		t.Fatalf("two hooks of a call did not run at once: %q %q", sa, sb)
	}
	f.Saw("stdout and stderr apart, exit code 0; other tools' matchers did not run; two 1 s hooks started %.3f s apart; a command under two matchers ran once", ta-tb)

	f = fault(t, "claude hooks: kill -9 of the bridge between calls")
	killed(t, pluginPid(t, "hooks-claude-code"), syscall.SIGKILL)
	if text := run("rm -rf /nonexistent-again"); text != "[denied by hook: rm -rf is not allowed in this project]" {
		t.Fatalf("after kill -9 of the bridge: %q", text)
	}
	f.Saw("the restarted bridge guards the next call")

	f = fault(t, "claude hooks: a command edits the settings")
	settings := filepath.Join(project, ".claude", "settings.json")
	run(fmt.Sprintf(`python3 -c 'import json; p=%q; d=json.load(open(p)); d["hooks"]={}; json.dump(d, open(p, "w"))'`, settings))
	if text := run("rm -rf /nonexistent-3"); text != "[denied by hook: rm -rf is not allowed in this project]" {
		t.Fatalf("after a command emptied the settings: %q", text)
	}
	f.Saw("the hooks are the snapshot read at load")
}

// ask goes to ctx.approval: a rule that allows lets the call run.
func TestClaudeHookAskApproved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	project := t.TempDir()
	writeSettings(t, project, map[string]any{"PreToolUse": []any{group("Bash", cmdHook(`echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"check"}}'`))}})
	s := startServe(t, ctx, claudeComp(project, "approval:\n  rules:\n    - {match: \"echo fine*\", decision: allow}\n  otherwise: deny\n"))
	f := fault(t, "claude hooks: ask with an approval rule")
	if text, _ := s.bash(t, ctx, map[string]any{"command": "echo fine"}); text != "fine" {
		t.Fatalf("ask, allowed by a rule: %q", text)
	}
	if text, _ := s.bash(t, ctx, map[string]any{"command": "echo other"}); !strings.Contains(text, "denied by hook: check") {
		t.Fatalf("ask, no rule: %q", text)
	}
	f.Saw("allowed by the rule; refused otherwise")
}

// A settings file the bridge cannot read stops the composition, naming
// the file and line.
func TestClaudeHookFilesRefused(t *testing.T) {
	for name, body := range map[string]string{
		"bad JSON":    "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"Bash\",, }\n    ]\n  }\n}\n",
		"bad matcher": "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"(Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"true\"}]}\n    ]\n  }\n}\n",
		"prompt hook": "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"Bash\", \"hooks\": [\n        {\"type\": \"prompt\", \"prompt\": \"is it safe?\"}\n      ]}\n    ]\n  }\n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			project := t.TempDir()
			_ = os.MkdirAll(filepath.Join(project, ".claude"), 0o755)
			file := filepath.Join(project, ".claude", "settings.json")
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			// serve applies the plugins (validate only describes them); its
			// stdin is empty, so it stops once loaded.
			out, err := exec.Command(filepath.Join(binDir, "dsh"), "serve", writeComp(t, claudeComp(project, ""))).CombinedOutput()
			line := map[string]string{"bad JSON": ":4", "bad matcher": ":4", "prompt hook": ":5"}[name]
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), file+line) {
				t.Fatalf("serve: %v\n%s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}

// Two bridges on one call: the host combines them (deny beats ask, two
// different rewrites deny, a rewrite the tool's schema refuses denies),
// and a bridge that stops answering fails the call closed, then the next
// calls run once it answers again.
func TestHookBridgesCombine(t *testing.T) {
	// The hooks are Python: their timeout is long enough for its start on
	// a loaded machine (1 s was not).
	const combineTimeout = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	one, two := t.TempDir(), t.TempDir()
	hook := func(rules string) map[string]any {
		return map[string]any{"PreToolUse": []any{group("Bash", cmdHook(`python3 -c '
import json, sys
c = json.load(sys.stdin)["tool_input"]["command"]
rules = `+rules+`
for prefix, out in rules.items():
    if c.startswith(prefix):
        print(json.dumps({"hookSpecificOutput": dict(hookEventName="PreToolUse", **out)}))
'`, int(combineTimeout.Seconds())))}}
	}
	writeSettings(t, one, hook(`{"echo both": {"permissionDecision": "ask", "permissionDecisionReason": "one asks"}, "echo rewrite": {"updatedInput": {"command": "echo by-one"}}, "echo same": {"updatedInput": {"command": "echo agreed"}}, "echo badarg": {"updatedInput": {"timeout": "soon"}}}`))
	writeSettings(t, two, hook(`{"echo both": {"permissionDecision": "deny", "permissionDecisionReason": "two denies"}, "echo rewrite": {"updatedInput": {"command": "echo by-two"}}, "echo same": {"updatedInput": {"command": "echo agreed"}}}`))
	s := startServe(t, ctx, `plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
  - id: hooks-one
    name: hooks-claude-code
    config: {projectDir: `+one+`, settingsFiles: [.claude/settings.json]}
  - id: hooks-two
    name: hooks-claude-code
    config: {projectDir: `+two+`, settingsFiles: [.claude/settings.json]}
`)
	run := func(command string) string {
		text, _ := s.bash(t, ctx, map[string]any{"command": command})
		return text
	}
	f := fault(t, "hook bridges: two answers on one call")
	if text := run("echo both"); text != "[denied by hook: two denies]" {
		t.Fatalf("ask and deny: %q", text)
	}
	if text := run("echo rewrite"); !strings.HasPrefix(text, "[denied by hook: two hooks replaced the arguments differently") {
		t.Fatalf("two rewrites: %q", text)
	}
	if text := run("echo same"); text != "agreed" {
		t.Fatalf("the same rewrite twice: %q", text)
	}
	if text := run("echo badarg"); !strings.HasPrefix(text, "[denied: a hook replaced the arguments with ones the tool does not take (arguments /timeoutMs: got string") {
		t.Fatalf("a rewrite the schema refuses: %q", text)
	}
	f.Saw("deny over ask; different rewrites denied; the same one kept; a bad one refused by the schema")

	f = fault(t, "hook bridges: SIGSTOP of a bridge during calls")
	var pid int
	for _, p := range testplugins.Running(binDir) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); filepath.Base(exe) == "dsh-hooks-claude-code" {
			pid = p
			break
		}
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	text := run("echo while-stopped")
	took := time.Since(start)
	_ = syscall.Kill(pid, syscall.SIGCONT)
	if !strings.HasPrefix(text, "[denied by hook: the hooks of plugin") || !strings.Contains(text, "so the call is refused") {
		t.Fatalf("a call while a bridge is stopped: %q (after %v)", text, took)
	}
	if text := run("echo after"); text != "after" {
		t.Fatalf("the next call: %q", text)
	}
	f.Saw("denied after %v (the bridge's bound: its longest hook, %v, plus 10 s); the next call ran", took.Round(time.Second), combineTimeout)
}

// A hook's systemMessage reaches the MCP client as a log message, not the
// model; a hook that fails tells the user the same way.
func TestClaudeHookSystemMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	project := t.TempDir()
	writeSettings(t, project, map[string]any{"PreToolUse": []any{group("Bash",
		cmdHook(`echo '{"systemMessage": "checked by the project hook"}'`),
		cmdHook(`echo broken >&2; exit 3`))}})
	s := startHTTP(t, claudeComp(project, ""))
	logs := make(chan string, 10)
	cs := s.connectWith(t, ctx, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
		logs <- fmt.Sprint(r.Params.Data)
	}})
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	f := fault(t, "claude hooks: systemMessage and a failing hook")
	text, _ := callText(t, ctx, cs, "bash", map[string]any{"command": "echo ran"})
	if text != "ran" {
		t.Fatalf("the call: %q", text)
	}
	var got []string
	for len(got) < 2 {
		select {
		case m := <-logs:
			got = append(got, m)
		case <-time.After(10 * time.Second):
			t.Fatalf("log messages: %q", got)
		}
	}
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "checked by the project hook") || !strings.Contains(all, "exited with code 3: broken") {
		t.Fatalf("log messages: %q", got)
	}
	f.Saw("%q", got)
}

// What a hook prints is read whole or said to be unreadable: a deny whose
// JSON is longer than the executor keeps in memory still denies, a stderr
// that is not UTF-8 does not turn a non-blocking failure into a refusal,
// and a tool named in bashTools is Bash to the hooks.
func TestClaudeHookOutputs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	project := t.TempDir()
	writeSettings(t, project, map[string]any{"PreToolUse": []any{group("Bash",
		cmdHook(`python3 -c 'import json,sys; c=json.load(sys.stdin)["tool_input"]["command"]; print(json.dumps({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"long "+"r"*70000}}) if "long" in c else "")'`),
		cmdHook(`printf '\377\376 not utf-8\n' >&2; exit 1`))}})
	s := startServe(t, ctx, `plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
  - id: term-bash
    name: terminal-bash
  - id: persistent
    name: tool-bash-persistent
    config: {toolName: pbash}
  - id: hooks
    name: hooks-claude-code
    config: {projectDir: `+project+`, settingsFiles: [.claude/settings.json], bashTools: [bash, pbash]}
`)
	f := fault(t, "claude hooks: a 70 KB deny, stderr that is not UTF-8, a second bash tool")
	text, _ := s.bash(t, ctx, map[string]any{"command": "echo long"})
	if !strings.HasPrefix(text, "[denied by hook: long rrrr") || !strings.HasSuffix(text, "more characters)]") || len(text) > 9000 {
		t.Fatalf("a 70 KB deny: %d characters: %.200q", len(text), text)
	}
	if text, _ := s.bash(t, ctx, map[string]any{"command": "echo short"}); text != "short" {
		t.Fatalf("a failing hook with stderr that is not UTF-8: %q", text)
	}
	if text, _ := s.tool(t, ctx, "pbash", map[string]any{"command": "echo long too", "description": "d"}); !strings.HasPrefix(text, "[denied by hook: long rrrr") {
		t.Fatalf("the persistent bash under bashTools: %.200q", text)
	}
	f.Saw("denied with the reason cut to 8,000 characters; the non-UTF-8 failure did not block; pbash guarded as Bash")
}
