//go:build linux

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// codexPre is a PreToolUse hook (bash) that answers by the command it is
// given, one word of it per behaviour.
const codexPre = `#!/bin/bash
in=$(cat)
cmd=$(printf '%s' "$in" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tool_input"]["command"])')
case "$cmd" in
*BLOCK2*) echo "exit two says no" >&2; exit 2 ;;
*EMPTY2*) exit 2 ;;
*JSONDENY*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"json says no"}}' ;;
*UNKNOWNKEY*) echo '{"extra":1,"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"lost deny"}}' ;;
*ASKME*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"ask?"}}' ;;
*REWRITE*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo rewritten"}}}' ;;
*SLEEPY*) sleep 60 ;;
*CRASH*) kill -SEGV $$ ;;
esac
exit 0
`

// preTimeout is pre.sh's timeout: long enough for its Python on a loaded
// machine; its SLEEPY case outlasts it by far.
const preTimeout = 20 * time.Second

// codexCheck (python3) checks the payload's fields itself, and blocks the
// call saying which is wrong.
const codexCheck = `import json, os, sys
d = json.load(sys.stdin)
if "CHECKPAYLOAD" not in d["tool_input"]["command"]:
    sys.exit(0)
want_keys = {"session_id", "turn_id", "transcript_path", "cwd", "hook_event_name", "model",
             "permission_mode", "tool_name", "tool_input", "tool_use_id"}
bad = []
if set(d) != want_keys: bad.append("keys %s" % sorted(d))
if not isinstance(d.get("session_id"), str) or not d["session_id"]: bad.append("session_id")
if not isinstance(d.get("turn_id"), str) or not d["turn_id"]: bad.append("turn_id")
if d.get("transcript_path", 0) is not None: bad.append("transcript_path")
if os.path.realpath(d.get("cwd", "")) != os.path.realpath(os.environ["WANT_CWD"]): bad.append("cwd %r" % d.get("cwd"))
if d.get("hook_event_name") != "PreToolUse": bad.append("hook_event_name")
if d.get("model") != "": bad.append("model")
if d.get("permission_mode") != "default": bad.append("permission_mode")
if d.get("tool_name") != "Bash": bad.append("tool_name")
if d.get("tool_input") != {"command": "echo CHECKPAYLOAD"}: bad.append("tool_input %r" % d.get("tool_input"))
if not str(d.get("tool_use_id", "")).startswith("call_"): bad.append("tool_use_id")
if bad:
    print("payload bad: " + ", ".join(bad), file=sys.stderr)
    sys.exit(2)
open(os.environ["WANT_MARK"], "w").write("payload ok")
`

// codexPost (python3) is a PostToolUse hook: feedback from exit 2, a stop.
const codexPost = `import json, sys
d = json.load(sys.stdin)
r = d["tool_response"]
if "POSTME" in r["stdout"]:
    print("post saw: " + r["stdout"].strip() + " exit " + str(r["exit_code"]), file=sys.stderr)
    sys.exit(2)
if "STOPME" in r["stdout"]:
    print(json.dumps({"continue": False, "stopReason": "halted by post"}))
`

// codexPar records when it ran; configured twice, identically.
const codexPar = `#!/bin/bash
grep -q PARALLEL || exit 0
echo "start $(date +%s.%N)" >> "$PAR_LOG"
sleep 1
echo "end $(date +%s.%N)" >> "$PAR_LOG"
`

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

func codexComp(project, home string) string {
	return toolsComp + `  - id: hooks
    name: hooks-codex
    config:
      projectDir: ` + project + `
      codexHome: ` + home + `
`
}

// Codex's hook files on dsh's calls: project hooks.json and the user
// config.toml's [hooks], each behaviour as Codex reads a hook's exit and
// output.
func TestHooksCodexBridge(t *testing.T) {
	f := fault(t, "Codex hooks on dsh's calls")
	project, home := t.TempDir(), t.TempDir()
	scripts := t.TempDir()
	writeFile(t, filepath.Join(scripts, "pre.sh"), codexPre)
	writeFile(t, filepath.Join(scripts, "check.py"), codexCheck)
	writeFile(t, filepath.Join(scripts, "post.py"), codexPost)
	writeFile(t, filepath.Join(scripts, "par.sh"), codexPar)
	mark, parLog := filepath.Join(scripts, "payload.ok"), filepath.Join(scripts, "par.log")
	// The payload's cwd is where the commands run: the folder dsh was
	// started in (this test's), not the project.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WANT_CWD", wd)
	t.Setenv("WANT_MARK", mark)
	t.Setenv("PAR_LOG", parLog)
	m := func(name string) string { return filepath.Join(scripts, name+".mark") }
	markHook := func(name string) string {
		return `{"type": "command", "command": "grep -q MATCH && cat > ` + m(name) + `; exit 0"}`
	}
	writeFile(t, filepath.Join(project, ".codex", "hooks.json"), `{
  "hooks": {
    "PreToolUse": [
      {"matcher": "^Bash$", "hooks": [
        {"type": "command", "command": "bash `+scripts+`/pre.sh", "timeout": `+fmt.Sprint(preTimeout.Seconds())+`},
        {"type": "command", "command": "python3 `+scripts+`/check.py"},
        {"type": "command", "command": "bash `+scripts+`/par.sh"},
        {"type": "command", "command": "bash `+scripts+`/par.sh"}
      ]},
      {"matcher": "Bash|Nothing", "hooks": [`+markHook("alt")+`]},
      {"matcher": "Bas", "hooks": [`+markHook("exact")+`]},
      {"matcher": "^Bas", "hooks": [`+markHook("regex")+`]},
      {"matcher": "mcp__dsh__job_.*", "hooks": [{"type": "command", "command": "cat > `+m("job")+`"}]}
    ],
    "SessionStart": [{"hooks": [{"type": "command", "command": "touch `+m("session")+`"}]}]
  }
}`)
	writeFile(t, filepath.Join(home, "config.toml"), `model = "unused"

[[hooks.PostToolUse]]
matcher = "Bash"

[[hooks.PostToolUse.hooks]]
type = "command"
command = "python3 `+scripts+`/post.py"
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startServe(t, ctx, codexComp(project, home))
	call := func(cmd string) string {
		t.Helper()
		out, _ := s.bash(t, ctx, map[string]any{"command": cmd})
		return out
	}

	if out := call("echo BLOCK2"); !strings.Contains(out, "Command blocked by PreToolUse hook: exit two says no. Command: echo BLOCK2") {
		t.Errorf("exit 2 with stderr: got %q", out)
	}
	if out := call("echo JSONDENY"); !strings.Contains(out, "Command blocked by PreToolUse hook: json says no. Command: echo JSONDENY") {
		t.Errorf("JSON deny: got %q", out)
	}
	f.Saw("exit 2 and a JSON deny block with Codex's text")
	for _, word := range []string{"EMPTY2", "UNKNOWNKEY", "ASKME", "CRASH"} {
		if out := call("echo " + word); !strings.HasPrefix(out, word) || strings.Contains(out, "blocked") {
			t.Errorf("%s should not block: got %q", word, out)
		}
	}
	f.Saw("exit 2 without stderr, an unknown key, ask and a crash run the call")
	if out := call("echo REWRITE"); strings.TrimSpace(out) != "rewritten" {
		t.Errorf("allow + updatedInput: got %q, want the rewritten command's output", out)
	}
	f.Saw("allow+updatedInput rewrote the command")
	start := time.Now()
	if out := call("echo SLEEPY"); !strings.HasPrefix(out, "SLEEPY") {
		t.Errorf("a hook past its timeout should not block: got %q", out)
	}
	// Cut at its timeout, well before its own end (60 s).
	if d := time.Since(start); d > preTimeout+20*time.Second {
		t.Errorf("a hook with a %v timeout held the call %v", preTimeout, d)
	}
	f.Saw("a timed-out hook failed open within its timeout")
	if out := call("echo CHECKPAYLOAD"); !strings.HasPrefix(out, "CHECKPAYLOAD") {
		t.Errorf("payload check: got %q", out)
	}
	if b, err := os.ReadFile(mark); err != nil || string(b) != "payload ok" {
		t.Errorf("payload check did not pass: %q %v", b, err)
	}
	f.Saw("the hook checked its payload's fields")
	if out := call("echo POSTME"); !strings.Contains(out, "post saw: POSTME exit 0") {
		t.Errorf("PostToolUse exit 2 feedback: got %q", out)
	}
	if out := call("echo STOPME"); !strings.Contains(out, "[stopped by hook: halted by post]") {
		t.Errorf("PostToolUse continue:false: got %q", out)
	}
	f.Saw("the config.toml PostToolUse hook read the output, gave feedback, stopped")

	call("echo MATCH")
	for name, want := range map[string]bool{"alt": true, "exact": false, "regex": true, "session": false} {
		if _, err := os.Stat(m(name)); (err == nil) != want {
			t.Errorf("matcher %s: ran %v, want %v", name, err == nil, want)
		}
	}
	if _, err := s.call(ctx, "job_output", map[string]any{"job_id": "j999"}); err != nil {
		t.Fatal(err)
	}
	var job map[string]any
	if b, err := os.ReadFile(m("job")); err != nil || json.Unmarshal(b, &job) != nil || job["tool_name"] != "mcp__dsh__job_output" {
		t.Errorf("mcp__dsh__ matcher: %q %v", b, err)
	} else if in, _ := job["tool_input"].(map[string]any); in["job_id"] != "j999" {
		t.Errorf("mcp__dsh__ tool_input: %v", job["tool_input"])
	}
	f.Saw("matchers: exact alternation, exact name, regex, mcp__dsh__ names; SessionStart not run")

	call("echo PARALLEL")
	b, _ := os.ReadFile(parLog)
	lines := strings.Fields(string(b))
	var starts, ends []float64
	for i := 0; i+1 < len(lines); i += 2 {
		v, _ := strconv.ParseFloat(lines[i+1], 64)
		if lines[i] == "start" {
			starts = append(starts, v)
		} else {
			ends = append(ends, v)
		}
	}
	if len(starts) != 2 || len(ends) != 2 {
		t.Fatalf("identical hooks should both run: %q", b)
	}
	if max(starts[0], starts[1]) > min(ends[0], ends[1]) {
		t.Errorf("hooks ran one after the other: %q", b)
	}
	f.Saw("two identical hooks both ran, at once")
}

// A hook file dsh cannot read refuses the bridge: dsh serve exits naming
// the file and the line.
func TestHooksCodexBadFileRefused(t *testing.T) {
	f := fault(t, "a bad Codex hook file")
	for _, c := range []struct {
		name, file, text, want string
	}{
		{"bad json", ".codex/hooks.json", "{\n  \"hooks\": {\n    \"PreToolUse\": [,]\n  }\n}\n", ".codex/hooks.json:3:"},
		{"bad toml", ".codex/config.toml", "[hooks]\n\n[[hooks.PreToolUse]]\nmatcher = = \"x\"\n", ".codex/config.toml:4:"},
		{"bad matcher", ".codex/config.toml", "[[hooks.PreToolUse]]\nmatcher = \"(?=x)\"\n\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"true\"\n", ".codex/config.toml:2:"},
		{"unknown type", ".codex/hooks.json", "{\"hooks\": {\"PostToolUse\": [{\"hooks\": [\n  {\"type\": \"command\", \"command\": \"true\"},\n  {\"type\": \"http\", \"url\": \"x\"}]}]}}\n", ".codex/hooks.json:3:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			project, home := t.TempDir(), t.TempDir()
			writeFile(t, filepath.Join(project, c.file), c.text)
			cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", writeComp(t, codexComp(project, home)))
			cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("dsh serve started with a bad hook file:\n%s", out)
			}
			if !strings.Contains(string(out), filepath.Join(project, c.want)) {
				t.Errorf("the error should name %s:\n%s", c.want, out)
			}
			f.Saw("%s refused at %s", c.name, c.want)
		})
	}
}
