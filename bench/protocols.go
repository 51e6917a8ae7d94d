package main

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolCalls: MCP tools/call of bash `true` over streamable HTTP to
// `dsh serve --http`, by a client with a session (2025-11-25) and by a
// stateless one (2026-07-28: every request a session of its own on the
// server, its owner the token's principal), in alternating blocks; then a
// background job's start and one job_list, each way.
func protocolCalls(dir string, n int) {
	s := startHTTPServe(dir)
	defer s.stop()
	withSession := s.connectAt("2025-11-25")
	defer withSession.Close()
	stateless := s.connectAt("")
	defer stateless.Close()
	if v := stateless.InitializeResult().ProtocolVersion; v != "2026-07-28" || stateless.ID() != "" {
		fail(fmt.Sprintf("the stateless client got protocol %q and session %q", v, stateless.ID()))
	}
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		check(err)
		if r.IsError {
			fail(fmt.Sprintf("%s failed: %s", tool, text(r)))
		}
	}
	bashTrue := map[string]any{"command": "true", "description": "bench"}
	for i := 0; i < 10; i++ {
		call(withSession, "bash", bashTrue)
		call(stateless, "bash", bashTrue)
	}
	const block = 10
	var a, b []time.Duration
	for len(a) < n {
		for i := 0; i < block; i++ {
			t := time.Now()
			call(withSession, "bash", bashTrue)
			a = append(a, time.Since(t))
		}
		for i := 0; i < block; i++ {
			t := time.Now()
			call(stateless, "bash", bashTrue)
			b = append(b, time.Since(t))
		}
	}
	fmt.Println("MCP tools/call of bash `true` over HTTP, a client with a session and a stateless one, blocks of 10 interleaved")
	row("with a session (2025-11-25)", a)
	row("stateless (2026-07-28)", b)
	// job_list of 8 jobs each way, interleaved.
	for _, cs := range []*mcp.ClientSession{withSession, stateless} {
		for i := 0; i < 8; i++ {
			call(cs, "bash", map[string]any{"command": "sleep 30", "description": "bench", "run_in_background": true})
		}
	}
	var la, lb []time.Duration
	for len(la) < n {
		t := time.Now()
		call(withSession, "job_list", map[string]any{})
		la = append(la, time.Since(t))
		t = time.Now()
		call(stateless, "job_list", map[string]any{})
		lb = append(lb, time.Since(t))
	}
	fmt.Println("job_list of 8 running jobs over HTTP, alternating")
	row("with a session", la)
	row("stateless", lb)
	fmt.Println()
}
