package reliability

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// failComp composes tool-bash, the terminal tools and the persistent bash
// tool (as pbash) in one server.
const failComp = `
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
  - id: term-bash
    name: terminal-bash
  - id: terminal-tools
    name: tool-terminal
  - id: persistent
    name: tool-bash-persistent
    config:
      toolName: pbash
`

// failedMark is what a result's text says of a command or shell that did
// not end cleanly: an exit code, a timeout, a shell's exit other than 0
// or by a signal, a shell that gave no true end.
var failedMark = regexp.MustCompile(`\[exit code: [1-9]|\[timed out after |exited with code [1-9]|ended by SIG|\[the shell did not report how the command ended`)

// Every tool's result is an error exactly when its text says the command
// (or the shell) did not end cleanly, through the real binaries over MCP.
func TestToolResultsFlagFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startHTTP(t, failComp)
	a := s.connect(t, ctx)
	f := fault(t, "isError on every tool's failed command")
	check := func(tool string, args map[string]any, want bool) string {
		t.Helper()
		if strings.HasSuffix(tool, "bash") {
			args["description"] = "d"
		}
		text, r := callText(t, ctx, a, tool, args)
		if r.IsError != want || failedMark.MatchString(text) != want {
			t.Fatalf("%s %v: isError %v, want %v, for %q", tool, args, r.IsError, want, text)
		}
		return text
	}
	for _, tool := range []string{"bash", "pbash"} {
		check(tool, map[string]any{"command": "echo hi"}, false)
		check(tool, map[string]any{"command": "echo hi; false"}, true)
		check(tool, map[string]any{"command": "echo hi; (exit 3)"}, true)
		check(tool, map[string]any{"command": "sleep 30", "timeoutMs": 1000}, true)
	}
	check("pbash", map[string]any{"command": "echo bye; exit 3"}, true)
	check("pbash", map[string]any{"command": "exit 0"}, false)
	check("pbash", map[string]any{"command": "kill -9 $$"}, true)

	id := openTerm(t, ctx, a)
	check("terminal_send", map[string]any{"session_id": id, "text": "echo hi; false"}, false) // the shell lives on
	if text := check("terminal_send", map[string]any{"session_id": id, "text": "exit 3", "waitMs": 10000}, true); !strings.Contains(text, "exited with code 3") {
		t.Fatalf("terminal_send exit 3: %q", text)
	}
	check("terminal_read", map[string]any{"session_id": id}, true)
	id = openTerm(t, ctx, a)
	check("terminal_send", map[string]any{"session_id": id, "text": "exit", "waitMs": 10000}, false)
	f.Saw("exit codes, timeouts, a shell's exit and its kill are errors in tool-bash, the persistent bash and the terminal tools; clean ends are not")
}
