package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/internal/testneeds"
)

// The tool's description, as the model reads it.
func TestDescription(t *testing.T) {
	golden.Check(t, "description", description(config{ToolName: "bash", MaxOutputChars: 30000, DefaultTimeoutMs: 120000, MaxTimeoutMs: 600000}))
}

// What is typed runs the command as written in the shell itself, and
// neither marker is in it.
func TestTypedLine(t *testing.T) {
	testneeds.Command(t, "bash")
	for _, cmd := range []string{
		"echo hi",
		"printf '%s\\n' \"a b\" 'c\"d' $'e\\tf'",
		"x='!$`\\\\'; echo \"$x\"",
		"cat <<'EOF'\nline $HOME\n  indented\nEOF",
		"echo \\\n  joined; echo ä漢字🙂",
		"false",
		"cd / && pwd",
	} {
		line := typedLine(cmd, "abc123", "def456")
		if strings.Contains(line, startMarker("abc123")) || strings.Contains(line, endMarker("def456")) || strings.ContainsAny(line, "\r\n") {
			t.Fatalf("the typed line of %q shows a marker or breaks a line: %s", cmd, line)
		}
		want, _ := exec.Command("bash", "-c", cmd+"\necho \"status $?\"").CombinedOutput()
		got := runOnTerminalFile(t, line)
		// The start marker ends bash's message for an unset variable.
		if i := strings.Index(got, startMarker("abc123")); i >= 0 && !strings.Contains(got[:i], "\n") {
			got = got[i:]
		}
		wantFramed := startMarker("abc123") + "\n" + strings.TrimSuffix(string(want), "status "+lastStatus(string(want))+"\n") + "\n" + endMarker("def456") + lastStatus(string(want)) + "\n"
		if string(got) != wantFramed {
			t.Errorf("%q:\n got %q\nwant %q", cmd, got, wantFramed)
		}
	}
}

// runOnTerminalFile runs line in bash with one file open for reading and
// writing as its stdin, stdout and stderr, as a terminal is (the markers
// are written to the shell's stdin), and returns what was written.
func runOnTerminalFile(t *testing.T, line string) string {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "tty"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := exec.Command("bash", "-c", line)
	c.Stdin, c.Stdout, c.Stderr = f, f, f
	_ = c.Run()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastStatus(out string) string {
	i := strings.LastIndex(out, "status ")
	return strings.TrimSpace(out[i+len("status "):])
}
