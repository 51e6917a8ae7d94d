package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testplugins"
)

// tool calls a tool and returns its text and structured content.
func (s *serve) tool(t *testing.T, ctx context.Context, name string, args map[string]any) (string, map[string]any) {
	t.Helper()
	if _, ok := args["description"]; !ok && name == "bash" {
		args["description"] = "reliability"
	}
	r, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v\nstderr:\n%s", name, args, err, s.stderr)
	}
	var out []string
	s.links = nil
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			out = append(out, c.Text)
		case *mcp.ResourceLink:
			s.links = append(s.links, c.Title)
		}
	}
	var facts map[string]any
	if r.StructuredContent != nil {
		b, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(b, &facts)
	}
	return strings.Join(out, "\n"), facts
}

// tmpfs mounts a tmpfs of size (mount options: "4m", "4m,nr_inodes=8") on
// a new folder for the test, or skips the test where that is not permitted.
func tmpfs(t *testing.T, size string) string { return testplugins.Tmpfs(t, size) }

func errorAs(err error, target any) bool { return errors.As(err, target) }
