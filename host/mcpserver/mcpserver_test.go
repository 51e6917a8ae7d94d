//go:build unix

package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/host"
)

// A tool that fails is answered to the model in words, through the real
// plugins: the status the host receives from the tool's plugin, and one
// the plugin wraps from its own call of ctx.terminals (with the seam's
// client or the generated one), show no transport words.
func TestToolFailureInWords(t *testing.T) {
	s, _ := serveComp(t, "plugins:\n  - id: drive\n    name: termdrive\n")
	cs := connectUser(t, s, "", nil)
	const gone = `error: tool "term": term close: no terminal session "t9" (closed sessions are forgotten)`
	for _, c := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"the plugin's own error", map[string]any{"op": "nosuch"}, `error: tool "term": no op "nosuch"`},
		{"a seam client's error, wrapped", map[string]any{"op": "close", "id": "t9", "fail": true}, gone},
		{"a generated client's error, wrapped", map[string]any{"op": "close", "id": "t9", "fail": true, "raw": true}, gone},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "term", Arguments: c.args})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := resultText(r); !r.IsError || got != c.want {
			t.Errorf("%s: %q (is error %v), want %q", c.name, got, r.IsError, c.want)
		}
	}

	// The host's answer is a *host.CallError in those words.
	args, _ := json.Marshal(map[string]any{"op": "close", "id": "t9", "fail": true, "raw": true})
	_, err := s.h.CallTool(context.Background(), host.ToolCall{Owner: "cli", Tool: "term", Arguments: args})
	var ce *host.CallError
	if !errors.As(err, &ce) || ce.Tool != "term" || strings.Contains(ce.Msg, "code =") || !strings.HasPrefix(ce.Msg, "term close: no terminal session") {
		t.Fatalf("the host's error: %#v", err)
	}
}
