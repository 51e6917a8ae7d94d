//go:build linux

package reliability

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The folder a hook is told (the payload's cwd) is the one the call's
// command runs in, under both bridges, before and after the call: without
// a workdir, with a relative one and with an absolute one, while the
// project whose hooks they are is another folder.
func TestHookCwdIsTheCommands(t *testing.T) {
	for _, bridge := range []string{"hooks-claude-code", "hooks-codex"} {
		t.Run(bridge, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			project, start, other, logs := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
			if err := os.Mkdir(filepath.Join(start, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			payloads := filepath.Join(logs, "payloads")
			hook := "{ cat; echo; } >> " + payloads
			var config string
			if bridge == "hooks-claude-code" {
				writeSettings(t, project, map[string]any{
					"PreToolUse":  []any{group("Bash", cmdHook(hook))},
					"PostToolUse": []any{group("Bash", cmdHook(hook))},
				})
				config = "settingsFiles: [.claude/settings.json]"
			} else {
				h, _ := json.Marshal(map[string]any{"hooks": map[string]any{
					"PreToolUse":  []any{group("Bash", cmdHook(hook))},
					"PostToolUse": []any{group("Bash", cmdHook(hook))},
				}})
				writeFile(t, filepath.Join(project, ".codex", "hooks.json"), string(h))
				config = "codexHome: " + t.TempDir()
			}
			s := startServe(t, ctx, `plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
    config: {cwd: `+start+`}
  - id: tools
    name: tool-bash
  - id: hooks
    name: `+bridge+`
    config:
      projectDir: `+project+`
      `+config+`
`)
			for _, workdir := range []string{"", "sub", other} {
				if err := os.WriteFile(payloads, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				args := map[string]any{"command": "pwd -P"}
				if workdir != "" {
					args["workdir"] = workdir
				}
				out, isErr := s.bash(t, ctx, args)
				ran := strings.TrimSpace(out)
				if isErr || !filepath.IsAbs(ran) {
					t.Fatalf("workdir %q: %q (isError %v)", workdir, out, isErr)
				}
				b, err := os.ReadFile(payloads)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				if len(lines) != 2 {
					t.Fatalf("workdir %q: want a PreToolUse and a PostToolUse payload, got %q", workdir, b)
				}
				for _, line := range lines {
					var p struct {
						Cwd   string `json:"cwd"`
						Event string `json:"hook_event_name"`
					}
					if err := json.Unmarshal([]byte(line), &p); err != nil {
						t.Fatalf("workdir %q: payload %q: %v", workdir, line, err)
					}
					if real, err := filepath.EvalSymlinks(p.Cwd); err != nil || real != ran {
						t.Errorf("workdir %q: the %s hook was told cwd %q; the command ran in %s", workdir, p.Event, p.Cwd, ran)
					}
				}
			}
		})
	}
}
