package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// tsClientCalls: the MCP tools/call of bash `true` through the official
// TypeScript SDK client (test/mcp-node/bench.mjs), against dsh serve of the
// default-shaped composition and a bare server on the same SDK that only
// execFiles bash (test/mcp-node/bare-server.mjs), plus the npm peers. One
// node process holds all the clients and calls them round-robin, with a
// direct execFile from node as the floor. Node or npm missing or failing is
// reported, and the bench goes on.
func tsClientCalls(dir string, n int, withPeers bool) {
	const title = "MCP tools/call of bash `true` through the TypeScript SDK client (stdio; target: dsh at most 1.00x the bare SDK server)"
	notMeasured := func(format string, a ...any) {
		fmt.Printf("%s\n  not measured: %s\n\n", title, fmt.Sprintf(format, a...))
	}
	nodeDir := filepath.Join(testplugins.Root(), "test", "mcp-node")
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		ci := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--silent")
		ci.Dir = nodeDir
		if out, err := ci.CombinedOutput(); err != nil {
			notMeasured("npm ci in %s: %v\n%s", nodeDir, err, out)
			return
		}
	}

	type server struct {
		Name      string            `json:"name"`
		Command   string            `json:"command"`
		Args      []string          `json:"args"`
		Env       map[string]string `json:"env,omitempty"`
		Tool      string            `json:"tool"`
		Arguments map[string]any    `json:"arguments"`
		MaxCalls  int               `json:"maxCalls,omitempty"`
	}
	const bare = "bare SDK + execFile"
	bashTrue := map[string]any{"command": "true", "description": "bench"}
	servers := []server{
		{Name: "dsh", Command: filepath.Join(dir, "dsh"), Args: []string{"serve", "--log-level", "error", toolsComposition(dir, "tools")},
			Tool: "bash", Arguments: bashTrue},
		{Name: bare, Command: "node", Args: []string{filepath.Join(nodeDir, "bare-server.mjs")},
			Tool: "bash", Arguments: bashTrue},
	}
	var peerErr error
	if withPeers {
		var peers []peer
		peers, peerErr = npmPeers(dir)
		for _, p := range peers {
			var env map[string]string
			for _, kv := range p.env {
				k, v, _ := strings.Cut(kv, "=")
				if env == nil {
					env = map[string]string{}
				}
				env[k] = v
			}
			servers = append(servers, server{Name: p.name, Command: p.command, Args: p.argv, Env: env,
				Tool: p.tool, Arguments: p.arguments, MaxCalls: p.maxCalls})
		}
	}
	spec, err := json.Marshal(servers)
	check(err)
	specPath := filepath.Join(dir, "tsclient.json")
	check(os.WriteFile(specPath, spec, 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(nodeDir, "bench.mjs"), fmt.Sprint(n), specPath)
	cmd.Dir = nodeDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		notMeasured("node bench.mjs: %v\n%s", err, stderr.String())
		return
	}
	var res struct {
		Servers map[string]struct {
			Nanos []int64 `json:"nanos"`
			Error string  `json:"error"`
		} `json:"servers"`
		Direct []int64 `json:"direct"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		notMeasured("node bench.mjs printed no result (%v): %s", err, out)
		return
	}
	durs := func(ns []int64) []time.Duration {
		d := make([]time.Duration, len(ns))
		for i, v := range ns {
			d[i] = time.Duration(v)
		}
		return d
	}

	fmt.Println(title)
	medians := map[string]time.Duration{}
	for _, s := range servers {
		r := res.Servers[s.Name]
		if len(r.Nanos) > 0 {
			row(s.Name, durs(r.Nanos))
			medians[s.Name] = median(durs(r.Nanos))
		}
		if r.Error != "" {
			fmt.Printf("  %-26s failed: %s\n", s.Name, r.Error)
		}
	}
	if peerErr != nil {
		fmt.Printf("  MCP shell servers from npm: not measured, %v\n", peerErr)
	}
	row("direct execFile (node)", durs(res.Direct))
	dshM, bareM := medians["dsh"], medians[bare]
	if dshM > 0 && bareM > 0 {
		verdict := "met"
		if dshM > bareM {
			verdict = "missed"
		}
		fmt.Printf("  ratio (median): dsh/bare %.2fx, target 1.00x: %s; dsh/direct %.2fx, bare/direct %.2fx\n",
			float64(dshM)/float64(bareM), verdict,
			float64(dshM)/float64(median(durs(res.Direct))), float64(bareM)/float64(median(durs(res.Direct))))
	}
	fmt.Println()
}
