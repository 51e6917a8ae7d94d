package hookbridge

import (
	"encoding/json"
	"strings"

	"github.com/dshrun/dsh/core/tools"
)

// ToolResponse is a call's result as PostToolUse hooks read it
// (tool_response): the text and dsh's facts, and for Bash Claude Code's
// fields too: stdout and stderr as dsh's bash shows them (stderr after a
// "[stderr]" line), whether it was interrupted, its exit code. Codex's
// shape for Bash is not known; both bridges give this one.
func ToolResponse(alias string, r *tools.CallResult) json.RawMessage {
	resp := map[string]any{"output": r.Text, "is_error": r.IsError}
	if len(r.Structured) > 0 && json.Valid(r.Structured) {
		resp["facts"] = json.RawMessage(r.Structured)
	}
	if alias == "Bash" {
		stdout, stderr, _ := strings.Cut(r.Text, "\n[stderr]\n")
		if strings.HasPrefix(r.Text, "[stderr]\n") {
			stdout, stderr = "", strings.TrimPrefix(r.Text, "[stderr]\n")
		}
		var f struct {
			ExitCode *int `json:"exitCode"`
			TimedOut bool `json:"timedOut"`
			Aborted  bool `json:"aborted"`
		}
		_ = json.Unmarshal(r.Structured, &f)
		resp["stdout"], resp["stderr"], resp["interrupted"], resp["isImage"] = stdout, stderr, f.TimedOut || f.Aborted, false
		if f.ExitCode != nil {
			resp["exit_code"] = *f.ExitCode
		}
	}
	out, _ := json.Marshal(resp)
	return out
}
