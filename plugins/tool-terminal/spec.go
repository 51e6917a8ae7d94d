package main

import (
	"encoding/json"
	"fmt"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/sdk/modeltext"
)

var toolNames = []string{"terminal_open", "terminal_send", "terminal_read", "terminal_signal", "terminal_close", "terminal_list"}

// toolSpecs are the six tools.
func toolSpecs(maxChars int) []*toolsv1.ToolSpec {
	id := map[string]any{"type": "string", "minLength": 1, "description": "The terminal: its id as terminal_open returned it, its short id (t1), or the name it was opened with."}
	signal := map[string]any{"type": "string", "enum": terminals.Signals}
	waitMs := func(def int, what string) map[string]any {
		return map[string]any{"type": "integer", "minimum": 0, "maximum": terminals.MaxWait.Milliseconds(), "default": def, "description": what}
	}
	obj := func(props map[string]any, required ...string) string {
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return mustJSON(s)
	}
	budget := modeltext.Thousands(int64(maxChars))
	return []*toolsv1.ToolSpec{
		{Name: "terminal_open", Title: "Open a persistent terminal", InputSchema: obj(map[string]any{
			"name": map[string]any{"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$", "description": "A name for the terminal, unique among yours."},
			"cwd":  map[string]any{"type": "string", "description": "Absolute working directory to start in."},
			"cols": map[string]any{"type": "integer", "minimum": 20, "maximum": 500, "default": 120, "description": "Columns."},
			"rows": map[string]any{"type": "integer", "minimum": 5, "maximum": 500, "default": 40, "description": "Rows."},
		}),
			Description: fmt.Sprintf(`Open an interactive bash terminal that stays open between calls: the working directory, variables, running programs (REPLs, less, editors, ssh) carry over. Returns its id; use terminal_send to type into it. At most %d terminals at once: close the ones you are done with.`, terminals.MaxPerOwner)},
		{Name: "terminal_send", Title: "Type into a terminal", InputSchema: obj(map[string]any{
			"session_id": id,
			"text":       map[string]any{"type": "string", "description": "What to type: a command, an answer to a prompt, a key such as q."},
			"submit":     map[string]any{"type": "boolean", "default": true, "description": "Press Enter after the text."},
			"signal":     with(signal, "A signal for the foreground program before typing, e.g. SIGINT to interrupt it."),
			"waitMs":     waitMs(2000, "How long to wait for the terminal to settle (ms)."),
		}, "session_id"),
			Description: fmt.Sprintf(`Type text into a terminal (a line, with Enter, unless submit is false), wait for it to settle, and return the screen as a person would see it, with any output that scrolled past since you last looked (at most %s characters, the newest).
A last line says why the wait ended:
- [wait: stdin_read — …]: the program in front is waiting for input (a prompt, a REPL, the shell).
- [wait: inferred_idle — …]: no output for a while, but nothing is reading input: it may still be working.
- [wait: timeout — …]: still running after waitMs: read again later (terminal_read) or interrupt it (terminal_signal SIGINT).
- [session … exited …]: the shell is gone; close the terminal.`, budget)},
		{Name: "terminal_read", Title: "Look at a terminal", InputSchema: obj(map[string]any{
			"session_id": id,
			"waitMs":     waitMs(0, "Wait up to this long for new output when there is none (ms)."),
		}, "session_id"),
			Description: fmt.Sprintf(`Return a terminal's screen and the output that scrolled past since you last looked (each line once; at most %s characters, the newest). Use it to follow a long-running command.`, budget)},
		{Name: "terminal_signal", Title: "Signal a terminal's program", InputSchema: obj(map[string]any{
			"session_id": id,
			"signal":     with(signal, "The signal: SIGINT interrupts (Ctrl-C), SIGTSTP suspends (Ctrl-Z), SIGTERM and SIGHUP ask to end, SIGKILL forces."),
			"target":     map[string]any{"type": "string", "enum": []string{"foreground", "shell"}, "default": "foreground", "description": "The program in front (default) or the shell itself."},
		}, "session_id", "signal"),
			Description: `Send a signal to the program in front of a terminal (or its shell). SIGKILL for the shell is refused: close the terminal instead.`},
		{Name: "terminal_close", Title: "Close a terminal", InputSchema: obj(map[string]any{"session_id": id}, "session_id"),
			Description: `Close a terminal: its shell and everything it started end, and the call returns once they are gone.`},
		{Name: "terminal_list", Title: "List your terminals", InputSchema: obj(map[string]any{}),
			Description: `List your open terminals, oldest first.`},
	}
}

func with(m map[string]any, desc string) map[string]any {
	out := map[string]any{"description": desc}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
