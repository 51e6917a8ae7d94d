//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/dshrun/dsh/internal/syncbuf"
)

// The command a container runs, run here on a terminal for each shell: it
// goes to the directory, prints the prompt's bytes, exports the facts,
// sets TERM, and the nonce is in neither the shell's environment nor its
// command line; a command that changes PS1 does not change bash's prompt.
func TestKubernetesShellCommand(t *testing.T) {
	for _, shell := range []string{shellBash, shellSh} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Skip(shell + " is not installed")
			}
			const nonce = "0123456789abcdef"
			dir := t.TempDir()
			ps1, printed := Prompt(shell, nonce)
			argv := Command(shell, "xterm-test", dir, RC(shell, ps1, map[string]string{"DSH_FACT": "it's", "X;echo INJECTED;Y": "v"}), nonce, "")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
			f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 200, Rows: 24})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				f.Close()
			}()
			out := &syncbuf.Buffer{}
			go func() { _, _ = io.Copy(out, f) }()
			from := 0 // what came before is not looked at
			waitFor := func(what string, want []byte) {
				t.Helper()
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if strings.Contains(out.String()[from:], string(want)) {
						return
					}
				}
				t.Fatalf("%s: no %q in %q", what, want, out.String()[from:])
			}
			waitFor("the first prompt", printed)
			from = len(out.String())
			_, _ = f.WriteString(`echo "[$PWD|$DSH_FACT|$TERM|$HISTFILE]"; tr '\0' ' ' </proc/$$/cmdline; echo; grep -c ` + nonce[:8] + `''` + nonce[8:] + ` /proc/$$/environ; PS1=x` + "\r")
			waitFor("the answer", []byte("["+dir+"|it's|xterm-test|]"))
			waitFor("the count", []byte("\n0\r\n"))
			want := "bash --noprofile --rcfile /dev/fd/3 -i \r\n"
			if shell == shellSh {
				want = "sh -i \r\n"
			}
			waitFor("the shell's command line", []byte(want))
			if shell == shellBash {
				waitFor("the prompt after PS1 changed", printed)
			}
			if strings.Contains(out.String(), "INJECTED\r\n") {
				t.Fatalf("a fact's name ran as a command: %q", out.String())
			}
			if rest := strings.ReplaceAll(out.String(), string(printed), ""); strings.Contains(rest, nonce) {
				t.Fatalf("the nonce outside the prompt: %q", rest)
			}
		})
	}
}
