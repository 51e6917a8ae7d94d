//go:build linux

package reliability

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// One session that floods its spill budget starves no other: its own
// output is kept up to its share and then said lost to this session's
// budget, while another session's output still spills whole and reads
// back byte for byte.
func TestSpillBudgetPerOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startHTTP(t, "host:\n  spill: {total: 4MiB, perOwner: 1MiB}\n"+toolsComp)
	a, b := s.connect(t, ctx), s.connect(t, ctx)
	f := fault(t, "spill budgets: one session floods its own")
	const flood, small = 3_000_000, 500_000
	bash := func(cs *mcp.ClientSession, n int) (string, []string) {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": digitsCmd(n), "description": "flood"}})
		if err != nil {
			t.Fatal(err)
		}
		var text, links []string
		for _, c := range r.Content {
			switch c := c.(type) {
			case *mcp.TextContent:
				text = append(text, c.Text)
			case *mcp.ResourceLink:
				links = append(links, c.URI)
			}
		}
		return strings.Join(text, "\n"), links
	}
	text, _ := bash(a, flood)
	if !strings.Contains(text, "; partial output (first 1,048,576 of 3,000,000 bytes; this session's spill budget used up): ") {
		t.Fatalf("a's first flood: %q", lastLine(text))
	}
	for i := 0; i < 3; i++ {
		if text, links := bash(a, flood); !strings.Contains(text, " omitted and lost: this session's spill budget used up]") || len(links) != 0 {
			t.Fatalf("a's flood %d after its budget: %q %v", i+2, lastLine(text), links)
		}
	}
	f.Saw("a: the first 1 MiB kept, then each flood said lost to this session's budget")
	text, links := bash(b, small)
	if !strings.Contains(text, "; full output: ") || len(links) != 1 {
		t.Fatalf("b after a used its budget: %q %v", lastLine(text), links)
	}
	r, err := b.ReadResource(ctx, &mcp.ReadResourceParams{URI: links[0]})
	if err != nil || len(r.Contents) != 1 || !bytes.Equal([]byte(r.Contents[0].Text), digits(small)) {
		t.Fatalf("b's spill file reads back %d bytes (%v), want its %d", len(r.Contents), err, small)
	}
	f.Saw("b: its output spilled whole and read back byte for byte")
}
