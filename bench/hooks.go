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
// call waits for that hook, itself a command run through the executor),
// interleaved with a direct `bash -c true` from Go: what a hook costs is
// read against what a process spawn costs on the same machine.
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
	servers := []*server{{name: "no hook bridge"}, {name: "bridge, other tools' hooks"}, {name: "a `true` hook on Bash"}}
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
	var direct []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		check(exec.Command("bash", "-c", "true").Run())
		direct = append(direct, time.Since(t))
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
	row("direct bash -c true", direct)
	spawn := median(direct)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	other, hooked := median(servers[1].ts)-median(servers[0].ts), median(servers[2].ts)-median(servers[0].ts)
	fmt.Printf("  %s: %+.2f ms (median)\n", servers[1].name, ms(other))
	// A hook is a command of its own: its cost is a few spawns (the
	// executor's run of it, the bridge's hops), whatever a spawn costs here.
	fmt.Printf("  %s: %+.2f ms (median), %.1fx a direct spawn (%.2f ms here)\n", servers[2].name, ms(hooked), float64(hooked)/float64(spawn), ms(spawn))
	fmt.Println()
}
