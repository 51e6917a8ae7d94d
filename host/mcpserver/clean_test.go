package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// dirty holds what a terminal obeys and a model must not read: an OSC 52
// clipboard write, SGR colours, an OSC window title, a progress line
// overwritten after carriage returns.
const dirty = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[1;31mred\x1b[0m \x1b]0;owned title\x07done\n10%\r100%\n"

const dirtyCleaned = "red done\n100%\n"

// resources/read of a spill file that holds escapes: the text sent is
// cleaned, the file keeps every byte; a file of escapes alone reads as an
// empty text, still a valid one.
func TestSpillReadCleaned(t *testing.T) {
	s := New(Options{Host: emptyHost(t), ReleaseGrace: time.Millisecond})
	se := connect(t, s, "")
	p := writeSpill(t, s, se.owner, "p1.stdout", []byte(dirty))
	r, err := se.read(spillURI(se.owner, "p1.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Contents) != 1 || r.Contents[0].Text != dirtyCleaned || r.Contents[0].MIMEType != "text/plain" {
		t.Fatalf("read %+v, want the text %q", r.Contents[0], dirtyCleaned)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != dirty {
		t.Fatalf("the spill file changed: %q %v", b, err)
	}
	writeSpill(t, s, se.owner, "p2.stdout", []byte("\x1b]52;c;eA==\x07\x1b[2J"))
	r, err = se.read(spillURI(se.owner, "p2.stdout"))
	if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != "" {
		t.Fatalf("a file of escapes alone: %+v %v", r, err)
	}
}

// Every text of a tool's result is cleaned: its contents, its resource
// links, its structured content (strings only; numbers as they were).
func TestCallResultCleaned(t *testing.T) {
	r := &mcp.CallToolResult{
		Content: []mcp.Content{
			&mcp.TextContent{Text: dirty},
			&mcp.TextContent{Text: "error: " + dirty},
			&mcp.ResourceLink{URI: "dsh-spill://o/p1", Name: "p\x1b[31m1", Title: "full \x1b]0;t\x07output"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "x://y", Text: dirty}},
		},
		StructuredContent: json.RawMessage(`{"command":"echo \u001b[31mhi","n":9007199254740993,"list":["\u001b]52;c;eA==\u0007x"]}`),
	}
	cleanCallResult(r)
	if got := r.Content[0].(*mcp.TextContent).Text; got != dirtyCleaned {
		t.Errorf("text %q", got)
	}
	if got := r.Content[1].(*mcp.TextContent).Text; got != "error: "+dirtyCleaned {
		t.Errorf("error text %q", got)
	}
	if l := r.Content[2].(*mcp.ResourceLink); l.Name != "p1" || l.Title != "full output" || l.URI != "dsh-spill://o/p1" {
		t.Errorf("link %+v", l)
	}
	if got := r.Content[3].(*mcp.EmbeddedResource).Resource.Text; got != dirtyCleaned {
		t.Errorf("embedded %q", got)
	}
	b, _ := json.Marshal(r.StructuredContent)
	if want := `{"command":"echo hi","list":["x"],"n":9007199254740993}`; string(b) != want {
		t.Errorf("structured %s, want %s", b, want)
	}
	plain := json.RawMessage(`{"n":1}`)
	if got := cleanStructured(plain); string(got.(json.RawMessage)) != `{"n":1}` {
		t.Errorf("clean structured content changed: %v", got)
	}
}

// What the server sends on its own is cleaned too: a user's question, a
// hook's message, a progress line.
func TestSentCleaned(t *testing.T) {
	var seen mcp.Params
	next := func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		seen = req.GetParams()
		return nil, nil
	}
	h := cleanSent(next)
	for _, p := range []mcp.Params{
		&mcp.ElicitParams{Message: dirty},
		&mcp.LoggingMessageParams{Data: dirty},
		&mcp.ProgressNotificationParams{Message: dirty},
	} {
		_, _ = h(context.Background(), "x", &mcp.ServerRequest[mcp.Params]{Params: p})
		var got any
		switch p := seen.(type) {
		case *mcp.ElicitParams:
			got = p.Message
		case *mcp.LoggingMessageParams:
			got = p.Data
		case *mcp.ProgressNotificationParams:
			got = p.Message
		}
		if got != dirtyCleaned {
			t.Errorf("%T sent %q", p, got)
		}
	}
}
