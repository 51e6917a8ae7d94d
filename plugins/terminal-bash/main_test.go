package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/internal/testneeds"
)

// What a bash session is started with, to the byte.
func TestBashStart(t *testing.T) {
	p := &terminalBash{cfg: config{ShellDialect: dialectBash, Shell: "bash", Term: "xterm-256color"}}
	golden.Check(t, "bash-argv", strings.Join(p.Argv(), "\n--\n"))
	env, printed := p.rc("0123456789abcdef")
	golden.Check(t, "bash-rc", env[rcVar])
	if len(env) != 3 || env["TERM"] != "xterm-256color" || env["HISTFILE"] != "" {
		t.Fatalf("bash env: %q", env)
	}
	if string(printed) != "\x1b]133;A;dsh=0123456789abcdef\a$ " {
		t.Fatalf("bash prompt: %q", printed)
	}
}

// What a pwsh session is started with, to the byte: the argv (the sh that
// becomes PowerShell, and PowerShell's), the rc text on fd 3, the
// environment, and the prompt's bytes.
func TestPwshStart(t *testing.T) {
	p := &terminalBash{cfg: config{ShellDialect: dialectPwsh, Shell: "pwsh", Term: "xterm-256color"}}
	golden.Check(t, "pwsh-argv", strings.Join(p.Argv(), "\n--\n"))
	env, printed := p.rc("0123456789abcdef")
	golden.Check(t, "pwsh-rc", env[rcVar])
	delete(env, rcVar)
	want := map[string]string{"TERM": "xterm-256color", "NO_COLOR": "1", "POWERSHELL_UPDATECHECK": "Off", "POWERSHELL_TELEMETRY_OPTOUT": "1"}
	if len(env) != len(want) {
		t.Fatalf("pwsh env: %q", env)
	}
	for k, v := range want {
		if env[k] != v {
			t.Fatalf("pwsh env: %q", env)
		}
	}
	if string(printed) != "\x1b]133;A;dsh=0123456789abcdef\aPS> " {
		t.Fatalf("pwsh prompt: %q", printed)
	}
	// The function's text is the printed bytes in PowerShell's escapes
	// (`e is ESC, `a is BEL), and nothing else in it is special to a
	// double-quoted PowerShell string.
	fn, _ := PwshPrompt("0123456789abcdef")
	inner := strings.TrimSuffix(strings.TrimPrefix(fn, `{ "`), `" }`)
	if strings.ContainsAny(inner, "$\"") || strings.ReplaceAll(strings.ReplaceAll(inner, "`e", "\x1b"), "`a", "\a") != string(printed) || strings.Contains(strings.NewReplacer("`e", "", "`a", "").Replace(inner), "`") {
		t.Fatalf("prompt function %q does not print %q", fn, printed)
	}
}

// The sh that starts PowerShell, run for real with a stand-in pwsh that
// records what it was handed and exits 7: its argv, that the rc text is
// on fd 3 and in neither its environment nor its command line, and its
// exit status as the session's. The stand-in is not PowerShell: what
// PowerShell then does with the text is not tested here.
func TestPwshHandsOver(t *testing.T) {
	dir := t.TempDir()
	standIn := filepath.Join(dir, "pwsh")
	script := `#!/bin/sh
for a in "$@"; do printf '%s\0' "$a"; done >"` + dir + `/argv"
env >"` + dir + `/env"
cat <&3 >"` + dir + `/fd3"
exit 7
`
	if err := os.WriteFile(standIn, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &terminalBash{cfg: config{ShellDialect: dialectPwsh, Shell: "pwsh", Term: "xterm-256color"}}
	env, _ := p.rc("0123456789abcdef")
	argv := p.Argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var exit *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("the sh stage: %v, want the stand-in's exit 7", err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	gotArgv := strings.Split(strings.TrimSuffix(read("argv"), "\x00"), "\x00")
	wantArgv := []string{"-NoLogo", "-NoProfile", "-NoExit", "-Command", pwshBoot}
	if strings.Join(gotArgv, "|") != strings.Join(wantArgv, "|") {
		t.Fatalf("pwsh's argv: %q, want %q", gotArgv, wantArgv)
	}
	if got := read("fd3"); got != env[rcVar]+"\n" {
		t.Fatalf("fd 3: %q, want the rc text %q", got, env[rcVar])
	}
	gotEnv := read("env")
	if strings.Contains(gotEnv, rcVar) || strings.Contains(gotEnv, "0123456789abcdef") || !strings.Contains(gotEnv, "NO_COLOR=1\n") {
		t.Fatalf("pwsh's environment holds the rc text or lacks NO_COLOR: %s", gotEnv)
	}
	if strings.Contains(strings.Join(gotArgv, " "), "0123456789abcdef") {
		t.Fatalf("the prompt's nonce in pwsh's argv: %q", gotArgv)
	}
}

// The rc text and PowerShell's one command run in a real PowerShell:
// the prompt function prints the prompt's bytes, PSReadLine is gone, the
// output is plain, progress is not drawn, and fd 3 is closed after. Only where pwsh is
// installed.
func TestPwshRCInPowerShell(t *testing.T) {
	pwsh := testneeds.Command(t, "pwsh")
	p := &terminalBash{cfg: config{ShellDialect: dialectPwsh, Shell: pwsh, Term: "xterm-256color"}}
	env, printed := p.rc("0123456789abcdef")
	check := `; [System.Console]::Out.Write((prompt) + '|' + [bool](Get-Module PSReadLine) + '|' + $PSStyle.OutputRendering + '|' + $ProgressPreference + '|' + (Test-Path /proc/self/fd/3))`
	cmd := exec.Command("/bin/sh", "-c", `r=$`+rcVar+`;unset `+rcVar+`;exec "$0" -NoLogo -NoProfile -Command "$1" 3<<E`+"\n$r\nE\n", pwsh, pwshBoot+check)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.HasSuffix(out, append(printed, "|False|PlainText|SilentlyContinue|False"...)) {
		t.Fatalf("the rc in PowerShell: %v\n%q", err, out)
	}
}
