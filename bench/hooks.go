package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hookCalls is what interception costs a call: bash `true` over MCP with
// no hook bridge, with one whose hooks cover other tools only (the call is
// not intercepted), and with one PreToolUse hook `true` on Bash (the
// call waits for that hook, itself a command), interleaved.
func hookCalls(dir string, n int) {
	project := filepath.Join(dir, "hooks-project")
	settings := func(matcher string) string {
		f := filepath.Join(project, matcher+".json")
		b, _ := json.Marshal(map[string]any{"hooks": map[string]any{"PreToolUse": []any{map[string]any{
			"matcher": matcher, "hooks": []any{map[string]any{"type": "command", "command": "true"}}}}}})
		check(os.MkdirAll(project, 0o755))
		check(os.WriteFile(f, b, 0o600))
		return f
	}
	comp := func(name, hooks string) string {
		f := filepath.Join(dir, "hooks-"+name+".yaml")
		body := fmt.Sprintf("plugins:\n  - id: env\n    path: %[1]s/dsh-shell-env\n  - id: bash\n    path: %[1]s/dsh-bash-local\n  - id: tools\n    path: %[1]s/dsh-tool-bash\n", dir)
		if hooks != "" {
			body += fmt.Sprintf("  - id: hooks\n    path: %s/dsh-hooks-claude-code\n    config: {projectDir: %s, settingsFiles: [%s]}\n", dir, project, hooks)
		}
		check(os.WriteFile(f, []byte(body), 0o600))
		return f
	}
	type server struct {
		name string
		cs   *mcp.ClientSession
		ts   []time.Duration
	}
	servers := []*server{{name: "no hook bridge"}, {name: "bridge, other tools' hooks"}, {name: "bridge, a `true` hook on Bash"}}
	comps := []string{comp("none", ""), comp("other", settings("Edit")), comp("bash", settings("Bash"))}
	call := func(cs *mcp.ClientSession) {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true", "description": "bench"}})
		check(err)
		if r.IsError {
			fail("hooks: bash true: " + text(r))
		}
	}
	for i, s := range servers {
		s.cs = connect(exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comps[i]))
		defer s.cs.Close()
		for j := 0; j < 10; j++ {
			call(s.cs)
		}
	}
	for i := 0; i < n; i++ {
		for _, s := range servers {
			t := time.Now()
			call(s.cs)
			s.ts = append(s.ts, time.Since(t))
		}
	}
	fmt.Println("bash tool `true` over MCP under hooks-claude-code (a call no hook covers costs nothing more)")
	for _, s := range servers {
		row(s.name, s.ts)
	}
	for _, s := range servers[1:] {
		fmt.Printf("  %s: %+.2f ms (median)\n", s.name, float64(median(s.ts)-median(servers[0].ts))/float64(time.Millisecond))
	}
	fmt.Println()
}
