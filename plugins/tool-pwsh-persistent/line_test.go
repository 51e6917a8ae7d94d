package main

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/plugins/lib/persistentshell"
)

const (
	start = "0123456789abcdef01234567"
	end   = "fedcba9876543210fedcba98"
)

// commands are commands with what a line reader, a quoting or an encoding
// could get wrong.
var commands = []string{
	`Write-Output hi`,
	"'a b'; \"c`\"d\"; 'it''s'; \"tab`tend\"",
	"$h = @'\nline $HOME\n  indented\n'@\n$h",
	"Write-Output ä漢字🙂 ‘quoted’",
	"Get-ChildItem /nonexistent",
	"sh -c 'exit 3'",
	"function f { 'from f' }; f # a comment at the end",
	"Write-Output `\n  continued",
	"Write-Output ends `",
}

// The exact text typed for a command and for its confirmation, and the
// markers the runs look for.
func TestLinesGolden(t *testing.T) {
	typed := pwsh{}.Type("Set-Location /tmp; $env:X = 'it''s'\nfunction f { \"x=$env:X\" }\nf", persistentshell.Nonces{Start: start, End: end})
	golden.Check(t, "command-line", typed.Text)
	golden.Check(t, "confirm-line", typed.Confirm.Text)
	if typed.From != "__DSH_PERSISTENT_PWSH_START_"+start+"__" || typed.Until != "__DSH_PERSISTENT_PWSH_DONE_"+start+":" ||
		typed.Confirm.From != "__DSH_PERSISTENT_PWSH_DONE_"+start || typed.Confirm.Until != "__DSH_PERSISTENT_PWSH_END_"+end+":" {
		t.Fatalf("markers: %+v %+v", typed.Line, *typed.Confirm)
	}
}

var base64RE = regexp.MustCompile(`FromBase64String\('([A-Za-z0-9+/=]*)'\)`)

// Each line is one line of printable ASCII the console host's reader takes
// as typed; neither shows a marker (the echo, or an error's position
// message, would); the end nonce is only in the confirming line; and the
// command arrives whole, with the line that keeps its $?.
func TestLinesShape(t *testing.T) {
	for _, cmd := range commands {
		typed := pwsh{}.Type(cmd, persistentshell.Nonces{Start: start, End: end})
		for _, line := range []string{typed.Text, typed.Confirm.Text} {
			for i := 0; i < len(line); i++ {
				if c := line[i]; c < 0x20 || c > 0x7e {
					t.Fatalf("%q: byte %#x at %d of %q", cmd, c, i, line)
				}
			}
			for _, m := range []string{startMarker(start), doneMarker(start), endMarker(end), "__DSH_PERSISTENT_PWSH_"} {
				if strings.Contains(line, m) {
					t.Fatalf("%q: the typed line shows %s: %s", cmd, m, line)
				}
			}
		}
		if strings.Contains(typed.Text, end) || !strings.Contains(typed.Confirm.Text, end) {
			t.Fatalf("%q: the end nonce belongs to the confirming line alone", cmd)
		}
		m := base64RE.FindStringSubmatch(typed.Text)
		if m == nil {
			t.Fatalf("%q: no command in %s", cmd, typed.Text)
		}
		b, err := base64.StdEncoding.DecodeString(m[1])
		if err != nil || string(b) != cmd+"\n;$global:__dsh_"+start+"=$?" {
			t.Fatalf("%q: the command as it arrives: %q (%v)", cmd, b, err)
		}
	}
}

// What the ends' lines say.
func TestStatus(t *testing.T) {
	for rest, want := range map[string]struct {
		status int
		ok     bool
	}{
		"ok": {0, true}, "0": {0, true}, "3": {3, true}, "-1": {-1, true},
		lostStatus: {0, false}, nestedStatus: {0, false}, "": {0, false}, "1 ": {0, false}, "x": {0, false},
	} {
		if status, ok := (pwsh{}).Status(rest); status != want.status || ok != want.ok {
			t.Errorf("Status(%q) = %d, %v", rest, status, ok)
		}
	}
}

// The tool's description, as the model reads it.
func TestDescription(t *testing.T) {
	golden.Check(t, "description", description(config{ToolName: "pwsh", MaxOutputChars: 30000, DefaultTimeoutMs: 120000, MaxTimeoutMs: 600000}))
}

// Both lines, run by a real PowerShell one after the other as its prompt
// would run them, run the command as written and frame its output with
// the markers and its status. Only where pwsh is installed.
func TestLinesInPowerShell(t *testing.T) {
	pwshPath := testneeds.Command(t, "pwsh")
	for _, c := range []struct {
		cmd, out, status string
	}{
		{commands[0], "hi\n", "0"},
		{commands[1], "a b\nc\"d\nit's\ntab\tend\n", "0"},
		{commands[2], "line $HOME\n  indented\n", "0"},
		{commands[3], "ä漢字🙂 ‘quoted’\n", "0"},
		{commands[5], "", "3"},
		{commands[6], "from f\n", "0"},
		{"Write-Error boom 2>$null", "", "1"},
		{"$x = 1", "", "0"},
		{commands[8], "ends\n", "0"},
		{"$global:LASTEXITCODE = $true; Write-Error boom 2>$null", "", "1"},
	} {
		typed := pwsh{}.Type(c.cmd, persistentshell.Nonces{Start: start, End: end})
		dir := t.TempDir()
		script := filepath.Join(dir, "lines.ps1")
		// Two statements of one script stand for two lines at the prompt.
		if err := os.WriteFile(script, []byte(typed.Text+"\n"+typed.Confirm.Text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(pwshPath, "-NoLogo", "-NoProfile", "-NonInteractive", "-File", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.cmd, err, out)
		}
		want := startMarker(start) + "\n" + c.out + "\n" + doneMarker(start) + ":ok\n\n" + doneMarker(start) + "\n" + endMarker(end) + c.status + "\n"
		if string(out) != want {
			t.Errorf("%q:\n got %q\nwant %q", c.cmd, out, want)
		}
	}
}
