package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/plugins/lib/pwshargs"
)

// PowerShell itself through the real binaries, where pwsh is installed:
// compositions/pwsh.yaml served and called as an agent would.

// pwshYAML is compositions/pwsh.yaml.
func pwshYAML(t *testing.T) string {
	t.Helper()
	testneeds.Command(t, "pwsh")
	return filepath.Join(testplugins.Root(), "compositions", "pwsh.yaml")
}

// What the model reads of each command, run by PowerShell: all of it, or
// where PowerShell's layout is its own, the lines that matter in order.
func TestPwshRealCommands(t *testing.T) {
	f := pwshYAML(t)
	// A long command reaches PowerShell on descriptor 3, which nothing it
	// starts holds.
	long := "'long-ok'; sh -c 'if [ -e /dev/fd/3 ]; then echo fd3-open; else echo fd3-closed; fi' # " + strings.Repeat("ü", pwshargs.MaxInline)
	for _, c := range []struct {
		name, command string
		want          []string // the whole text, or lines it holds in order, the last one last
	}{
		{"UTF-8 out", `Write-Output 'héllo ✓'`, []string{"héllo ✓"}},
		{"UTF-8 into a program and back", `'héllo ✓' | sh -c 'cat'; $s = sh -c "printf 'wörld'"; "got $s"`, []string{"héllo ✓\ngot wörld"}},
		{"exit N", `'before'; exit 3; 'after'`, []string{"before\n[exit code: 3]"}},
		{"a program's exit code", `sh -c 'exit 5'`, []string{"[exit code: 5]"}},
		{"a program's failure, then success", `sh -c 'exit 5'; 'after'`, []string{"after"}},
		{"a cmdlet's error", `Write-Error 'boom'`, []string{"boom", "[exit code: 1]"}},
		{"a table held back to size its columns", `[pscustomobject]@{Name='a'; Id=1}`, []string{"Name", "----", "a", "1"}},
		{"a long command", long, []string{"long-ok\nfd3-closed"}},
		{"no color, no progress", `$PSStyle.OutputRendering; $ProgressPreference`, []string{"PlainText\nSilentlyContinue"}},
	} {
		args := `{"command":` + strconv.Quote(c.command) + `,"description":"d"}`
		out, errOut, code := dsh(t, nil, "call", f, "pwsh", args)
		got := strings.TrimRight(out, " \n")
		if code != 0 || !inOrder(got, c.want) {
			t.Errorf("%s: exit %d, stdout %q, want %q; stderr:\n%s", c.name, code, out, c.want, errOut)
		}
		// An error, warning or verbose line is text, never PowerShell's
		// CLIXML serialization of its record.
		if strings.Contains(out, "#< CLIXML") || strings.Contains(errOut, "#< CLIXML") {
			t.Errorf("%s: CLIXML in the output: stdout %q, stderr:\n%s", c.name, out, errOut)
		}
	}
}

// A timeout kills PowerShell and the program it started.
func TestPwshRealTimeoutKillsTheTree(t *testing.T) {
	f := pwshYAML(t)
	marker := strconv.Itoa(500000 + os.Getpid()%99999)
	out, errOut, code := dsh(t, nil, "call", f, "pwsh", `{"command":"sh -c 'sleep `+marker+`'","description":"d","timeoutMs":2000}`)
	if code != 0 || !strings.Contains(out, "[timed out after 2000ms]") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	waitGone(t, "sleep "+marker, 5*time.Second)
}

// A background job of PowerShell: started at once, its output read as it
// comes, its end with its exit code.
func TestPwshRealBackgroundJob(t *testing.T) {
	f := pwshYAML(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", f)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pwsh", Arguments: map[string]any{"command": `1..3 | ForEach-Object { "n$_"; Start-Sleep -Milliseconds 200 }; exit 4`, "description": "d", "run_in_background": true}})
	if err != nil {
		t.Fatal(err)
	}
	id, _, ok := strings.Cut(strings.TrimPrefix(text(t, r), "[job "), " started")
	if !ok {
		t.Fatalf("start: %q", text(t, r))
	}
	var all strings.Builder
	for !strings.Contains(all.String(), "[exit code: 4]") {
		if ctx.Err() != nil {
			t.Fatalf("the job never ended: %q", all.String())
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_output", Arguments: map[string]any{"job_id": id}})
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(text(t, r) + "\n")
		time.Sleep(100 * time.Millisecond)
	}
	for _, w := range []string{"n1", "n2", "n3"} {
		if !strings.Contains(all.String(), w) {
			t.Fatalf("job output lacks %s: %q", w, all.String())
		}
	}
}

// inOrder reports whether text is want[0], or for several, holds each of
// want in order and ends with the last.
func inOrder(text string, want []string) bool {
	if len(want) == 1 {
		return text == want[0]
	}
	rest := text
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			return false
		}
		rest = rest[i+len(w):]
	}
	return strings.HasSuffix(text, want[len(want)-1])
}
