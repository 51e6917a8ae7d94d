package persistentshell

import (
	"encoding/json"
	"fmt"

	"github.com/dshrun/dsh/core/tools/toolsv1"
)

// ToolSpec is a persistent tool's spec: the shell tools' schema without
// workdir and run_in_background (the shell keeps its own directory, and
// runs its own background work), with the dialect's title, the words for
// its command argument and its description.
func ToolSpec(cfg Config, title, command, description string) *toolsv1.ToolSpec {
	props := map[string]any{
		"command":     map[string]any{"type": "string", "minLength": 1, "description": command},
		"description": map[string]any{"type": "string", "description": "What the command does, in five to ten words."},
		"timeoutMs": map[string]any{"type": "integer", "minimum": 1, "maximum": cfg.MaxTimeoutMs,
			"description": fmt.Sprintf("Timeout in milliseconds (default %d, at most %d).", cfg.DefaultTimeoutMs, cfg.MaxTimeoutMs)},
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             []string{"command", "description"},
		"additionalProperties": false,
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err)
	}
	return &toolsv1.ToolSpec{Name: cfg.ToolName, Title: title, Description: description, InputSchema: string(b)}
}
