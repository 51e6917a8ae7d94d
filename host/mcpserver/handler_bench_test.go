package mcpserver

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
)

// The tool handler's own cost, around a host call that fails at once (no
// such tool): what the server adds to every call.
func BenchmarkHandler(b *testing.B) {
	none := func(string) (string, bool) { return "", false }
	comp, err := composition.Parse(filepath.Join(b.TempDir(), "comp.yaml"), []byte("plugins: []\n"), none)
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.Start(context.Background(), comp, host.Options{RuntimeBase: b.TempDir(), LookupEnv: none})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	s := New(Options{Host: h})
	handle := s.handler("nosuch")
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "nosuch", Arguments: json.RawMessage(`{"command":"true"}`)}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := handle(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
