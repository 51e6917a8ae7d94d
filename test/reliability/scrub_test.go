//go:build linux

package reliability

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Credentials by the name segments and values the scrub knows, each with
// a value no command may see.
var segmentSecrets = []string{
	"GH_PAT=ghp-never-passed-1",
	"GITHUB_PAT=ghp-never-passed-2",
	"MYSQL_PWD=mysql-never-passed-3",
	"DB_PASS=db-never-passed-4",
	"CI_JOB_JWT=jwt-never-passed-5",
	"GIT_CREDS=creds-never-passed-6",
	"NETLIFY_AUTH=netlify-never-passed-7",
	"SENTRY_DSN=https://sentrykey-never-passed-8@o0.ingest.sentry.io/1",
	"NOTIFY_URL=https://hooks.slack.com/services/T000/B000/slack-never-passed-9",
	"SESSION_COOKIE=cookie-never-passed-10",
}

// Names commands rely on that only look like credentials at a glance.
var keptNames = []string{
	"OLDPWD=/",
	"GIT_AUTHOR_NAME=A U Thor",
	"GIT_AUTHOR_EMAIL=author@example.com",
	"COMPASS_HOME=/opt/compass",
	"BYPASS_CACHE=1",
}

// checkScrubbed fails unless env (a command's `env`) holds every kept name
// with its value and none of the withheld values or names.
func checkScrubbed(t *testing.T, what, env string) {
	t.Helper()
	for _, kv := range keptNames {
		if !strings.Contains("\n"+env+"\n", "\n"+kv+"\n") {
			t.Errorf("%s lacks %s", what, kv)
		}
	}
	for _, kv := range segmentSecrets {
		name, value, _ := strings.Cut(kv, "=")
		if strings.Contains(env, value) || strings.Contains("\n"+env, "\n"+name+"=") {
			t.Errorf("%s sees %s", what, name)
		}
	}
}

// The scrub's rule holds for every kind of command through the real
// binaries: a bash call, a terminal and a hook see none of the withheld
// variables and every kept one; `dsh config` masks what they withhold.
func TestScrubEveryCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	project, out := t.TempDir(), t.TempDir()
	writeSettings(t, project, map[string]any{"PreToolUse": []any{group("Bash",
		cmdHook(`env > "`+out+`/hook.env"`))}})
	comp := `plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
  - id: term-bash
    name: terminal-bash
  - id: terminals
    name: tool-terminal
  - id: hooks
    name: hooks-claude-code
    config: {projectDir: ` + project + `, settingsFiles: [.claude/settings.json]}
`
	s := startServeIn(t, ctx, t.TempDir(), comp, append(append([]string{}, segmentSecrets...), keptNames...)...)
	f := fault(t, "credentials by name segment and by value in the host's environment")

	env, isErr := s.bash(t, ctx, map[string]any{"command": "env"})
	if isErr {
		t.Fatalf("env: %q", env)
	}
	checkScrubbed(t, "a bash call", env)
	hook, err := os.ReadFile(filepath.Join(out, "hook.env"))
	if err != nil {
		t.Fatalf("the hook wrote no environment: %v", err)
	}
	checkScrubbed(t, "a hook", string(hook))

	id := openTerm(t, ctx, s.cs)
	termFile := filepath.Join(out, "term.env")
	sendTerm(t, ctx, s.cs, map[string]any{"session_id": id, "text": "env > " + termFile + " && echo wrote-env"})
	var term []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if term, err = os.ReadFile(termFile); err == nil && strings.Contains(string(term), "BYPASS_CACHE=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal wrote no environment in 30s: %v", err)
		}
	}
	checkScrubbed(t, "a terminal", string(term))
	f.Saw("a bash call, a hook and a terminal: none of %d credentials, %d kept names", len(segmentSecrets), len(keptNames))

	// dsh config masks what the commands did not see.
	file := writeComp(t, `settings:
  deploy:
    header: "Bearer ${GH_PAT}"
    mysql: "-p${MYSQL_PWD}"
    sentry: "${SENTRY_DSN}"
    notify: "${NOTIFY_URL}"
    author: "${GIT_AUTHOR_NAME}"
`+comp)
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "config", file)
	cmd.Env = append(append(os.Environ(), segmentSecrets...), keptNames...)
	printed, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dsh config: %v\n%s", err, printed)
	}
	for _, kv := range segmentSecrets {
		if _, value, _ := strings.Cut(kv, "="); strings.Contains(string(printed), value) {
			t.Errorf("dsh config prints %q:\n%s", value, printed)
		}
	}
	if !strings.Contains(string(printed), "header: '********'") || !strings.Contains(string(printed), "author: A U Thor") {
		t.Errorf("dsh config:\n%s", printed)
	}
	f.Saw("dsh config masks the interpolated credentials and prints the author")
}
