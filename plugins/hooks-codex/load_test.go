package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/plugins/lib/hookbridge"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadOrderAndLines(t *testing.T) {
	project, home := t.TempDir(), t.TempDir()
	write(t, filepath.Join(home, "hooks.json"), `{"hooks": {"PreToolUse": [
  {"matcher": "Bash", "hooks": [{"type": "command", "command": "user-json"}]}]}}`)
	write(t, filepath.Join(home, "config.toml"), `model = "m"

[hooks]
PostToolUse = [
  { matcher = "*", hooks = [
    { type = "command", command = "user-post", timeout = 0 },
  ] },
]

[[hooks.PreToolUse]]
matcher = "Bash"

[[hooks.PreToolUse.hooks]]
type = "prompt"

[[hooks.PreToolUse.hooks]]
type = "command"
command = "user-toml"
timeout = 5

[hooks.state."x:pre_tool_use:0:0"]
trusted_hash = "abc"
`)
	write(t, filepath.Join(project, ".codex", "hooks.json"), `{"hooks": {"PreToolUse": [
  {"hooks": [{"type": "command", "command": "user-json"}, {"type": "command", "command": "  "}]}],
  "Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}`)
	l, err := load(config{ProjectDir: project, CodexHome: home})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range l.sync.MatchingAll(hookbridge.PreToolUse, "Bash") {
		got = append(got, h.Command+"@"+strings.TrimPrefix(strings.TrimPrefix(h.Where, home), project))
	}
	want := []string{"user-json@/hooks.json:2", "user-toml@/config.toml:16", "user-json@/.codex/hooks.json:2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("PreToolUse hooks: got %v, want %v", got, want)
	}
	post := l.sync.MatchingAll(hookbridge.PostToolUse, "mcp__dsh__x")
	if len(post) != 1 || post[0].Timeout != time.Second || !strings.HasSuffix(post[0].Where, "config.toml:6") {
		t.Errorf("PostToolUse (inline tables, timeout 0 as 1 s): %+v", post)
	}
	if h := l.sync.MatchingAll(hookbridge.PreToolUse, "Bash"); h[0].Timeout != maxHook || h[1].Timeout != 5*time.Second {
		t.Errorf("timeouts: %v %v", h[0].Timeout, h[1].Timeout)
	}
	notes := strings.Join(l.notes, "\n")
	for _, n := range []string{"config.toml:13: a prompt hook is skipped", ".codex/hooks.json:2: a command hook with an empty command", ".codex/hooks.json:3: Stop hooks are not run", "both run"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q:\n%s", n, notes)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct{ name, file, text, want string }{
		{"json syntax", "hooks.json", "{\"hooks\":\n {\"PreToolUse\": [}}", "hooks.json:2:"},
		{"json type", "hooks.json", "{\"hooks\": {\"PreToolUse\": [{\"hooks\": [\n{\"type\": \"command\", \"command\": \"x\", \"timeout\": -1}]}]}}", "hooks.json:2:"},
		{"toml syntax", "config.toml", "a = 1\n[hooks\n", "config.toml:2:"},
		{"toml type", "config.toml", "[[hooks.PreToolUse]]\nmatcher = 3\n", "config.toml:2:"},
		{"matcher", "hooks.json", "{\"hooks\": {\"PostToolUse\": [\n{\"matcher\": \"(\", \"hooks\": []}]}}", "hooks.json:2:"},
		{"no type", "config.toml", "[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ncommand = \"x\"\n", "config.toml:2:"},
		{"unknown type", "hooks.json", "{\"hooks\": {\"PreToolUse\": [{\"hooks\": [\n{\"type\": \"http\"}]}]}}", "hooks.json:2:"},
		{"no command", "hooks.json", "{\"hooks\": {\"PreToolUse\": [{\"hooks\": [\n\n{\"type\": \"command\"}]}]}}", "hooks.json:3:"},
		{"case", "hooks.json", "{\"hooks\": {\"pretooluse\": []}}", "Codex reads it only as"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, c.file), c.text)
			_, err := load(config{ProjectDir: dir, HooksFiles: []string{c.file}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestResolveCodexHome(t *testing.T) {
	env := map[string]string{"HOME": "/h", "CODEX_HOME": "/c"}
	cfg, _ := resolve(config{ProjectDir: "/p"}, func(k string) string { return env[k] })
	if cfg.CodexHome != "/c" {
		t.Errorf("CODEX_HOME: %q", cfg.CodexHome)
	}
	delete(env, "CODEX_HOME")
	cfg, _ = resolve(config{ProjectDir: "/p"}, func(k string) string { return env[k] })
	if cfg.CodexHome != "/h/.codex" {
		t.Errorf("HOME: %q", cfg.CodexHome)
	}
	cfg, _ = resolve(config{ProjectDir: "/p", CodexHome: "/x"}, func(k string) string { return env[k] })
	if cfg.CodexHome != "/x" {
		t.Errorf("codexHome: %q", cfg.CodexHome)
	}
}
