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

// sandboxCalls: the bash tool's `true` under bash-sandbox (each runner)
// against bash-local, over MCP, interleaved call by call in one run: the
// sandbox's cost per command is the difference of the medians.
func sandboxCalls(dir string, n int) {
	ws := filepath.Join(dir, "ws")
	check(os.MkdirAll(ws, 0o755))
	comp := func(name, executor, runner string) string {
		f := filepath.Join(dir, name+".yaml")
		section := ""
		if runner != "" {
			section = fmt.Sprintf("sandbox:\n  defaultMode: workspace-write\n  workspaceRoot: %s\n  runner: %s\n", ws, runner)
		}
		check(os.WriteFile(f, []byte(fmt.Sprintf(`%splugins:
  - id: env
    path: %s
  - id: bash
    path: %s
  - id: tools
    path: %s
`, section, filepath.Join(dir, "dsh-shell-env"), filepath.Join(dir, "dsh-"+executor), filepath.Join(dir, "dsh-tool-bash"))), 0o600))
		return f
	}
	type server struct {
		name string
		cs   *mcp.ClientSession
		ts   []time.Duration
	}
	servers := []*server{{name: "bash-local"}, {name: "bash-sandbox, landlock"}, {name: "bash-sandbox, bubblewrap"}}
	comps := []string{comp("local", "bash-local", ""), comp("sandbox-landlock", "bash-sandbox", "landlock"), comp("sandbox-bwrap", "bash-sandbox", "bubblewrap")}
	call := func(cs *mcp.ClientSession) error {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true", "description": "bench", "workdir": ws}})
		if err != nil {
			return err
		}
		if r.IsError {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					return fmt.Errorf("%s", tc.Text)
				}
			}
			return fmt.Errorf("an error result")
		}
		return nil
	}
	var live []*server
	for i, s := range servers {
		s.cs = connect(exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comps[i]))
		defer s.cs.Close()
		var err error
		for j := 0; j < 10 && err == nil; j++ {
			err = call(s.cs) // warm up
		}
		if err != nil {
			fmt.Printf("sandbox: %s not measured: %v\n", s.name, err)
			continue
		}
		live = append(live, s)
	}
	for i := 0; i < n; i++ {
		for _, s := range live {
			t := time.Now()
			check(call(s.cs))
			s.ts = append(s.ts, time.Since(t))
		}
	}
	fmt.Println("bash tool `true` over MCP, sandboxed against bash-local (target: landlock runner at most +1.5 ms)")
	for _, s := range live {
		row(s.name, s.ts)
	}
	if len(live) > 0 && live[0] == servers[0] {
		for _, s := range live[1:] {
			fmt.Printf("  %s: %+.2f ms (median)\n", s.name, float64(median(s.ts)-median(servers[0].ts))/float64(time.Millisecond))
		}
	}
	fmt.Println()
}
