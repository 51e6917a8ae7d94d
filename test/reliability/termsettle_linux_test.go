//go:build linux

package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testneeds"
)

// What no runner can stop a sandboxed shell from creating (an .envrc that
// did not exist, a new repository's config and hooks) is undone for a
// terminal too, under either runner: after each command of the persistent
// shell and each send, before its answer; and what a shell's background
// job planted between sends, once the terminal is closed.
func TestSandboxedTerminalsUndo(t *testing.T) {
	testneeds.Command(t, "git")
	for _, runner := range []string{"landlock", "bubblewrap"} {
		t.Run(runner, func(t *testing.T) {
			if runner == "bubblewrap" {
				testneeds.Command(t, "bwrap")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
			defer cancel()
			ws := t.TempDir()
			s := startHTTP(t, fmt.Sprintf(`sandbox:
  defaultMode: workspace-write
  workspaceRoot: %s
  runner: %s
plugins:
  - id: env
    name: shell-env
  - id: term-bash
    name: terminal-bash
    config:
      cwd: %s
  - id: terminal-tools
    name: tool-terminal
  - id: persistent-bash
    name: tool-bash-persistent
`, ws, runner, ws))
			a := s.connect(t, ctx)
			envrc := filepath.Join(ws, ".envrc")
			// planted: what is gone once the sandbox settled, and what of
			// the new repository stays (its history).
			planted := func(what, repo string) {
				t.Helper()
				mustNotExist(t, what+": the .envrc it made", envrc)
				for _, p := range []string{"config", "hooks"} {
					mustNotExist(t, what+": the new repository's "+p, filepath.Join(ws, repo, ".git", p))
				}
				if _, err := os.Stat(filepath.Join(ws, repo, ".git", "HEAD")); err != nil {
					t.Fatalf("%s: the new repository lost its HEAD: %v", what, err)
				}
			}
			plant := func(repo string) string {
				return fmt.Sprintf("cd %s && git init -q %s && touch .envrc && test -f %s/.git/config && test -d %s/.git/hooks && echo planted-$?", ws, repo, repo, repo)
			}

			f := fault(t, "sandboxed terminals ("+runner+"): plantings of the persistent shell")
			text, _ := pbash(t, ctx, a, plant("sub"))
			expect(t, "the persistent shell", text, "planted-0")
			planted("a command of the persistent shell", "sub")
			text, _ = pbash(t, ctx, a, plant("sub1"))
			expect(t, "the persistent shell's next command", text, "planted-0")
			planted("the next command of the persistent shell", "sub1")
			f.Saw("undone after each command: %q", text)

			f = fault(t, "sandboxed terminals ("+runner+"): plantings of a terminal send")
			id := openTerm(t, ctx, a)
			text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": plant("sub2")})
			expect(t, "a send", text, "planted-0")
			planted("a terminal send", "sub2")
			f.Saw("undone after the send")

			f = fault(t, "sandboxed terminals ("+runner+"): a background planting, then terminal_close")
			// The job plants once the send has answered (the test says go).
			done, goAhead := filepath.Join(ws, "done"), filepath.Join(ws, "go")
			text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "(until [ -e " + goAhead + " ]; do sleep 0.05; done; " + plant("sub3") + " && touch " + done + ") >/dev/null 2>&1 & echo started"})
			expect(t, "a background job", text, "started")
			if err := os.WriteFile(goAhead, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(done); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the background job did not finish within 60 s")
				}
			}
			if _, err := os.Stat(envrc); err != nil {
				t.Fatalf("the background job's .envrc is not there before the close: %v", err)
			}
			callText(t, ctx, a, "terminal_close", map[string]any{"session_id": id})
			planted("a background job of a closed terminal", "sub3")
			f.Saw("undone at the close")
		})
	}
}
