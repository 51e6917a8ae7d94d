package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCalls: an MCP tools/call of `true` through dsh (Go SDK client, stdio,
// dsh serve, tool-bash, bash-local, the host's spawn) against a direct
// `bash -c true` from Go, interleaved; then the same call against two MCP
// shell servers from the npm registry, so docs/performance.md can say where dsh
// stands. Also: the default-shaped composition's start to its first
// answered tools/list.
func mcpCalls(dir string, n int, peers bool) {
	comp := toolsComposition(dir, "tools")

	// Start to first tools/list, 10 times.
	var ready []time.Duration
	for i := 0; i < 10; i++ {
		t := time.Now()
		cs := connect(exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comp))
		_, err := cs.ListTools(context.Background(), nil)
		check(err)
		ready = append(ready, time.Since(t))
		_ = cs.Close()
	}
	fmt.Println("dsh serve (shell-env, bash-local, tool-bash): start to first answered tools/list (target: 150ms median)")
	row("start to tools/list", ready)
	fmt.Printf("  %s\n", map[bool]string{true: "met", false: "missed"}[median(ready) <= 150*time.Millisecond])
	fmt.Println()

	cs := connect(exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comp))
	defer cs.Close()
	call := func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true", "description": "bench"}})
		check(err)
		if r.IsError {
			fail("bash true failed")
		}
	}
	for i := 0; i < 10; i++ {
		call() // warm up
	}
	var viaMCP, direct []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		check(exec.Command("bash", "-c", "true").Run())
		direct = append(direct, time.Since(t))
		t = time.Now()
		call()
		viaMCP = append(viaMCP, time.Since(t))
	}
	// The MCP leg alone: a ping's round trip over the same session, back to
	// back and after an idle spell as long as the direct spawn.
	var pings, idlePings []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		check(cs.Ping(context.Background(), nil))
		pings = append(pings, time.Since(t))
	}
	for i := 0; i < n/4; i++ {
		time.Sleep(median(direct))
		t := time.Now()
		check(cs.Ping(context.Background(), nil))
		idlePings = append(idlePings, time.Since(t))
	}
	fmt.Println("MCP tools/call of bash `true` over stdio (target: within 0.5 ms of the floor of the design)")
	row("dsh", viaMCP)
	row("direct bash -c true", direct)
	row("MCP ping (same session)", pings)
	row("same, after idle", idlePings)
	fmt.Printf("  ratio (median): %.2fx\n", float64(median(viaMCP))/float64(median(direct)))
	floor("direct spawn + MCP ping + host->tool->host->executor->host", 4, median(pings), median(idlePings), median(direct), median(viaMCP), 500*time.Microsecond)
	fmt.Println()
	if peers {
		peerServers(dir, n, viaMCP, direct)
	}
}

func connect(cmd *exec.Cmd) *mcp.ClientSession {
	client := mcp.NewClient(&mcp.Implementation{Name: "dsh-bench", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	check(err)
	return cs
}

// peer is an MCP shell server from the npm registry and the call of `true`
// it is measured with.
type peer struct {
	name      string
	command   string
	argv      []string
	env       []string // nil: this process's environment
	tool      string
	arguments map[string]any
	maxCalls  int // 0: as many as dsh
}

// npmPeers installs the two npm servers into dir/npm (once: a later caller
// finds them there) and says how to start and call them.
func npmPeers(dir string) ([]peer, error) {
	npm := filepath.Join(dir, "npm")
	mcJS := filepath.Join(npm, "node_modules", "mcp-server-commands", "build", "index.js")
	dcJS := filepath.Join(npm, "node_modules", "@wonderwhy-er", "desktop-commander", "dist", "index.js")
	if _, err := os.Stat(dcJS); err != nil {
		check(os.MkdirAll(npm, 0o755))
		install := exec.Command("npm", "install", "--no-audit", "--no-fund", "--silent", "mcp-server-commands@0.5.0", "@wonderwhy-er/desktop-commander@0.2.52")
		install.Dir = npm
		install.Env = append(os.Environ(), "PUPPETEER_SKIP_DOWNLOAD=1")
		if out, err := install.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("npm install failed: %v\n%s", err, out)
		}
	}
	home := filepath.Join(dir, "dc-home")
	check(os.MkdirAll(filepath.Join(home, ".claude-server-commander"), 0o755))
	check(os.WriteFile(filepath.Join(home, ".claude-server-commander", "config.json"), []byte(`{"telemetryEnabled": false}`), 0o644))
	return []peer{
		{name: "mcp-server-commands 0.5.0", command: "node", argv: []string{mcJS},
			tool: "run_command", arguments: map[string]any{"command": "true"}},
		{name: "desktop-commander 0.2.52", command: "node", argv: []string{dcJS, "--no-onboarding"},
			env:  []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "DESKTOP_COMMANDER_DISABLE_TELEMETRY=1", "SHELL=/bin/bash"},
			tool: "start_process", arguments: map[string]any{"command": "true", "timeout_ms": 10000},
			maxCalls: 60}, // ~12ms a call
	}, nil
}

// peerServers measures the npm servers like dsh. An install that fails is
// reported, not hidden.
func peerServers(dir string, n int, dshT, direct []time.Duration) {
	peers, err := npmPeers(dir)
	if err != nil {
		fmt.Printf("MCP shell servers from npm: not measured, %v\n", err)
		return
	}
	fmt.Println("MCP tools/call of `true` over stdio, other servers (same client, same run)")
	row("dsh (above)", dshT)
	for _, p := range peers {
		client := mcp.NewClient(&mcp.Implementation{Name: "dsh-bench", Version: "1"}, nil)
		cmd := exec.Command(p.command, p.argv...)
		cmd.Env = p.env
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		cancel()
		if err != nil {
			fmt.Printf("  %-26s not measured: %v\n", p.name, err)
			continue
		}
		var ts []time.Duration
		m := n
		if p.maxCalls > 0 {
			m = min(n, p.maxCalls)
		}
		ok := true
		for i := 0; i < m+5 && ok; i++ {
			t := time.Now()
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: p.tool, Arguments: p.arguments})
			if err != nil {
				fmt.Printf("  %-26s call failed: %v\n", p.name, err)
				ok = false
				break
			}
			if i >= 5 {
				ts = append(ts, time.Since(t))
			}
		}
		_ = cs.Close()
		if len(ts) > 0 {
			row(p.name, ts)
		}
	}
	row("direct bash -c true", direct)
	fmt.Println()
}
