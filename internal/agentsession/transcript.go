// Package agentsession is a session of typical agent commands, run through
// the real dsh binaries over MCP, and what the model reads back from each.
// The golden test (test/transcript) and `make bench` (the characters a
// model reads, against other agents' published limits) share it.
package agentsession

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Step is one tool call of the session.
type Step struct {
	Name string
	Tool string         // bash unless set
	Args map[string]any // the tool's arguments; "JOB" in a value is the last job id
	// Raw is the shell command whose plain output (stdout then stderr, as a
	// terminal would get them, unbounded) stands for what an agent without
	// dsh would be handed; "" when the step has no such command.
	Raw string
}

// Steps is the session: failures, a real repository, progress bars, a
// traceback, floods, binary output, colours, a server in the background.
func Steps() []Step {
	bash := func(name, cmd string, extra ...any) Step {
		args := map[string]any{"command": cmd, "description": name}
		for i := 0; i+1 < len(extra); i += 2 {
			args[extra[i].(string)] = extra[i+1]
		}
		raw := cmd
		if _, bg := args["run_in_background"]; bg {
			raw = ""
		}
		return Step{Name: name, Tool: "bash", Args: args, Raw: raw}
	}
	return []Step{
		bash("git status", "git status"),
		bash("git log", "git log"),
		bash("git log --oneline", "git log --oneline --graph"),
		bash("edit and diff", "printf 'package calc\\n\\n// Add adds.\\nfunc Add(a, b int) int { return a - b }\\n' > calc.go && git diff"),
		bash("failing go test", "go test -count=1 ./..."),
		bash("find", "find . -name '*.go' -not -path './.git/*' | sort"),
		bash("grep with colour despite NO_COLOR", "grep --color=always -n func calc.go calc_test.go"),
		bash("a test runner's colours", `printf '\033[32m✓\033[0m parses the config\n\033[1;31m✗ reads the port\033[0m\n\033[2m2 tests, 1 failed\033[0m\n'`),
		bash("npm-style progress bar", `for i in 0 10 20 30 40 50 60 70 80 90 100; do printf '\rinstalling [%-10s] %3d%%' "$(printf '#%.0s' $(seq 1 $((i/10+1))) | head -c $((i/10)))" $i; done; printf '\nadded 42 packages in 3s\n'`),
		bash("progress with erase in line", `for f in a.tar b.tar c.tar; do printf '\r\033[Kdownloading %s' $f; done; printf '\r\033[Kdownloaded 3 files\n'`),
		bash("python traceback", "python3 -c 'def port(cfg):\n    return int(cfg[\"port\"])\nport({\"port\": \"eighty\"})'"),
		bash("a flood on both streams", "seq 1 300000; seq 1 50000 >&2"),
		bash("megabytes of one line", "head -c 2000000 /dev/zero | tr '\\0' x; echo"),
		bash("binary output", "head -c 4096 /bin/sh"),
		bash("OSC 52 clipboard write", `printf '\033]52;c;Y3VybCBldmlsLnNoIHwgc2g=\007copied\n'`),
		bash("screen clear", `printf '\033[2J\033[Hready\n'`),
		bash("unicode", `printf 'héllo wörld — ✓ 😀\n'`),
		bash("stderr and an exit code", "echo 'config: missing key \"port\"' >&2; exit 3"),
		bash("command not found", "definitely-not-a-command --version"),
		bash("a missing working directory", "ls", "workdir", "/nonexistent"),
		bash("a timeout", "echo started; sleep 5; echo never", "timeoutMs", 500),
		bash("a server in the background", "echo 'Serving HTTP on 0.0.0.0 port 8000'; for i in 1 2 3; do echo \"GET /page$i 200\"; sleep 0.2; done; sleep 30", "run_in_background", true),
		bash("wait a moment", "sleep 1"),
		{Name: "read the server's output", Tool: "job_output", Args: map[string]any{"job_id": "JOB"}},
		{Name: "stop the server", Tool: "job_kill", Args: map[string]any{"job_id": "JOB"}},
		{Name: "its last words", Tool: "job_output", Args: map[string]any{"job_id": "JOB"}},
		bash("a command after all that", "echo still here"),
	}
}

// Result is what the model read of one step.
type Result struct {
	Step    Step
	Text    string
	IsError bool
	Raw     string // the raw command's unbounded output, when measured
}

// Repo makes a small Go repository in dir with a fixed history, so that
// git's output is the same on every run.
func Repo(dir string) error {
	files := map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.22\n",
		"calc.go":      "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 2); got != 4 {\n\t\tt.Fatalf(\"Add(2, 2) = %d, want 4\", got)\n\t}\n}\n",
		"README.md":    "# calc\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "go.mod", "README.md"},
		{"commit", "-q", "-m", "Start calc"},
		{"add", "calc.go", "calc_test.go"},
		{"commit", "-q", "-m", "Add Add"},
	}
	for i, args := range steps {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		date := fmt.Sprintf("2026-01-0%dT10:00:00Z", i+1)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
			"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com",
			"GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date, "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	return nil
}

// Env is the environment the session's host runs in: git, go and the
// terminal as an agent's would be, nothing of the caller's git config.
func Env(home string) []string {
	env := os.Environ()
	if _, ok := os.LookupEnv("GOCACHE"); !ok {
		// HOME moves, the build cache need not.
		if dir, err := os.UserCacheDir(); err == nil {
			env = append(env, "GOCACHE="+filepath.Join(dir, "go-build"))
		}
	}
	return append(env, "HOME="+home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_PAGER=cat", "PAGER=cat",
		"NO_COLOR=1", "TERM=xterm-256color", "LC_ALL=C.UTF-8", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
}

// Run starts `dsh serve` from binDir in repo on the default tools
// composition and runs every step in one session. With raw, each step's
// command also runs under plain bash in a copy of the repository state at
// that point (the same commands, one after the other).
func Run(ctx context.Context, binDir, repo, home string, raw bool) ([]Result, error) {
	rs, _, err := RunListing(ctx, binDir, repo, home, raw)
	return rs, err
}

// RunListing is Run that also returns each tool's description as the
// session listed it.
func RunListing(ctx context.Context, binDir, repo, home string, raw bool) ([]Result, map[string]string, error) {
	comp := filepath.Join(home, "comp.yaml")
	if err := os.WriteFile(comp, []byte(composition), 0o600); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", comp)
	cmd.Dir = repo
	cmd.Env = append(Env(home), "XDG_RUNTIME_DIR="+home)
	client := mcp.NewClient(&mcp.Implementation{Name: "transcript", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	descs := map[string]string{}
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("tools/list: %w", err)
	}
	for _, t := range listed.Tools {
		descs[t.Name] = t.Description
	}
	var out []Result
	job := ""
	for _, st := range Steps() {
		args := map[string]any{}
		for k, v := range st.Args {
			if v == "JOB" {
				v = job
			}
			args[k] = v
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: st.Tool, Arguments: args})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", st.Name, err)
		}
		res := Result{Step: st, IsError: r.IsError}
		var texts []string
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		res.Text = strings.Join(texts, "\n")
		if id := jobRE.FindString(res.Text); id != "" && st.Args["run_in_background"] == true {
			job = id
		}
		out = append(out, res)
	}
	if raw {
		if err := rawOutputs(ctx, repo, home, out); err != nil {
			return nil, nil, err
		}
	}
	return out, descs, nil
}

var jobRE = regexp.MustCompile(`\bj[0-9]+\b`)

const composition = `
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`

// rawOutputs runs each step's command under plain bash in a fresh copy of
// the repository, in order, and records its whole output (stdout, then
// stderr).
func rawOutputs(ctx context.Context, repo, home string, rs []Result) error {
	dir := filepath.Join(home, "raw")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := Repo(dir); err != nil {
		return err
	}
	for i := range rs {
		st := rs[i].Step
		if st.Raw == "" {
			continue
		}
		wd := dir
		if w, ok := st.Args["workdir"].(string); ok {
			wd = w
		}
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if ms, ok := st.Args["timeoutMs"].(int); ok {
			rctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		}
		cmd := exec.CommandContext(rctx, "bash", "-c", st.Raw)
		cmd.Dir = wd
		cmd.Env = Env(home)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run() // a failing command is part of the transcript
		cancel()
		rs[i].Raw = stdout.String() + stderr.String()
	}
	return nil
}

// Placeholders replaces what differs between runs (paths, owners,
// durations) so a transcript can be compared with a golden file.
func Placeholders(s, repo, home string) string {
	s = strings.ReplaceAll(s, repo, "<repo>")
	s = strings.ReplaceAll(s, home, "<home>")
	for _, p := range placeholders {
		s = p.re.ReplaceAllString(s, p.with)
	}
	return s
}

var placeholders = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`mcp-[0-9a-f]{32}`), "<owner>"},
	{regexp.MustCompile(`<home>/dsh/[^/\s]+/spill/[^\s\]]+`), "<spill file>"},
	{regexp.MustCompile(`\b[0-9]+\.[0-9]+s\b`), "<duration>"},
	{regexp.MustCompile(`\(pid [0-9]+\)`), "(pid <pid>)"},
	{regexp.MustCompile(`\bpid [0-9]+\b`), "pid <pid>"},
}
