package main

import (
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
	bashTrue := map[string]any{"command": "true", "description": "bench"}
	for i := 0; i < 10; i++ {
		mustCall(withSession, "bash", bashTrue)
		mustCall(stateless, "bash", bashTrue)
	}
	const block = 10
	var a, b []time.Duration
	for len(a) < n {
		a = append(a, timeEach(block, func() { mustCall(withSession, "bash", bashTrue) })...)
		b = append(b, timeEach(block, func() { mustCall(stateless, "bash", bashTrue) })...)
	}
	fmt.Println("MCP tools/call of bash `true` over HTTP, a client with a session and a stateless one, blocks of 10 interleaved")
	row("with a session (2025-11-25)", a)
	row("stateless (2026-07-28)", b)
	// job_list of 8 jobs each way, interleaved.
	for _, cs := range []*mcp.ClientSession{withSession, stateless} {
		for i := 0; i < 8; i++ {
			mustCall(cs, "bash", map[string]any{"command": "sleep 30", "description": "bench", "run_in_background": true})
		}
	}
	var la, lb []time.Duration
	for len(la) < n {
		la = append(la, timeEach(1, func() { mustCall(withSession, "job_list", map[string]any{}) })...)
		lb = append(lb, timeEach(1, func() { mustCall(stateless, "job_list", map[string]any{}) })...)
	}
	fmt.Println("job_list of 8 running jobs over HTTP, alternating")
	row("with a session", la)
	row("stateless", lb)
	fmt.Println()
}
