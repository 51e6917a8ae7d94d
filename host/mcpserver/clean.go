package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/sdk/modeltext"
)

// The front end is the one place every text the model or the user reads
// passes: whatever a tool, a hook bridge, an error or a spill file holds,
// what leaves here is cleaned by modeltext (no escape sequences, no
// control characters but newline and tab, valid UTF-8). Tools clean their
// own output too (and count what they removed); cleaning twice changes
// nothing.

// cleanText is s as the model may read it.
func cleanText(s string) string {
	b, _ := modeltext.Clean([]byte(s))
	return string(b)
}

// cleanResults cleans the results of the requests the server answers:
// every text of a tool call's result (its contents, resource links,
// structured content) and of a resource read. The spill file read stays
// as it is on disk; only the text sent is cleaned. (The tools' titles and
// descriptions, a plugin's words, are cleaned once, when Sync adds them.)
func cleanResults(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		switch r := res.(type) {
		case *mcp.CallToolResult:
			if r != nil {
				cleanCallResult(r)
			}
		case *mcp.ReadResourceResult:
			if r != nil {
				for _, c := range r.Contents {
					if c != nil && c.Blob == nil {
						c.Text = cleanText(c.Text)
					}
				}
			}
		}
		return res, err
	}
}

func cleanCallResult(r *mcp.CallToolResult) {
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			c.Text = cleanText(c.Text)
		case *mcp.ResourceLink:
			c.Name, c.Title, c.Description = cleanText(c.Name), cleanText(c.Title), cleanText(c.Description)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Blob == nil {
				c.Resource.Text = cleanText(c.Resource.Text)
			}
		}
	}
	if r.StructuredContent != nil {
		r.StructuredContent = cleanStructured(r.StructuredContent)
	}
}

// cleanStructured cleans every string of a structured result (keys too),
// and leaves it as it was when nothing needed cleaning.
func cleanStructured(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var tree any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // numbers as they were, however large
	if err := d.Decode(&tree); err != nil {
		return v
	}
	changed := false
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case string:
			c := cleanText(x)
			changed = changed || c != x
			return c
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k, e := range x {
				ck := cleanText(k)
				if ck != k {
					changed = true
					delete(x, k)
				}
				x[ck] = walk(e)
			}
		}
		return x
	}
	tree = walk(tree)
	if !changed {
		return v
	}
	out, err := json.Marshal(tree)
	if err != nil {
		return v
	}
	return json.RawMessage(out)
}

// cleanSent cleans the texts of what the server sends on its own: the
// user's questions (elicitation), messages (hooks' system messages) and
// progress lines.
func cleanSent(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch p := req.GetParams().(type) {
		case *mcp.ElicitParams:
			if p != nil {
				p.Message = cleanText(p.Message)
			}
		case *mcp.LoggingMessageParams:
			if p != nil {
				if s, ok := p.Data.(string); ok {
					p.Data = cleanText(s)
				}
			}
		case *mcp.ProgressNotificationParams:
			if p != nil {
				p.Message = cleanText(p.Message)
			}
		}
		return next(ctx, method, req)
	}
}
