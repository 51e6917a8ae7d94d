package reliability

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
)

// pwshComp is compositions/pwsh-persistent.yaml, whose terminal tools
// see the tool's sessions.
func pwshComp(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(testplugins.Root(), "compositions", "pwsh-persistent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pwshListIDRE finds the persistent session's id in terminal_list's text.
var pwshListIDRE = regexp.MustCompile(`(t\d+-[0-9a-f]{12})  persistent-pwsh `)

// ppwsh calls the persistent pwsh tool and fails the test on any text that
// shows a marker.
func ppwsh(t *testing.T, ctx context.Context, cs *mcp.ClientSession, command string, extra ...any) (string, *mcp.CallToolResult) {
	t.Helper()
	args := map[string]any{"command": command, "description": "reliability"}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	text, r := callText(t, ctx, cs, "pwsh", args)
	if strings.Contains(text, "DSH_PERSISTENT") {
		t.Fatalf("a marker in the text of %q:\n%s", command, text)
	}
	return text, r
}

// What dsh hands the program it starts as PowerShell, and how it takes
// its end, through dsh serve and the real plugins with a stand-in pwsh on
// PATH: a program that records its arguments, its environment and fd 3,
// and exits 7. The stand-in is not PowerShell; nothing here tests what
// PowerShell does.
func TestPersistentPwshStandIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	standIn := `#!/bin/sh
for a in "$@"; do printf '%s\0' "$a"; done >"` + dir + `/argv"
env >"` + dir + `/env"
cat <&3 >"` + dir + `/fd3"
exit 7
`
	if err := os.WriteFile(filepath.Join(dir, "pwsh"), []byte(standIn), 0o755); err != nil {
		t.Fatal(err)
	}
	s := startHTTPEnv(t, []string{"PATH=" + dir + ":" + os.Getenv("PATH")}, pwshComp(t))
	a := s.connect(t, ctx)

	f := fault(t, "persistent pwsh: a pwsh that exits at once (a stand-in)")
	text, r := ppwsh(t, ctx, a, "Get-Date")
	if text != noteFresh+"\n[the shell exited with code 7: the next command starts in a fresh shell (working directory and variables reset)]" || !r.IsError {
		t.Fatalf("a call whose shell exits at once: %q", text)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	argv := strings.Split(strings.TrimSuffix(read("argv"), "\x00"), "\x00")
	if strings.Join(argv[:4], " ") != "-NoLogo -NoProfile -NoExit -Command" || len(argv) != 5 || !strings.Contains(argv[4], "/dev/fd/3") {
		t.Fatalf("pwsh's arguments: %q", argv)
	}
	env, rc := read("env"), read("fd3")
	for _, want := range []string{"NO_COLOR=1\n", "TERM=xterm-256color\n", "DSH_COMPOSITION=pwsh-persistent\n"} {
		if !strings.Contains(env, want) {
			t.Fatalf("pwsh's environment lacks %q:\n%s", want, env)
		}
	}
	if strings.Contains(env, "133;A") || strings.Contains(strings.Join(argv, " "), "133;A") || strings.Contains(env, "DSH_TERMINAL_RC") {
		t.Fatalf("the prompt's mark in pwsh's environment or arguments:\n%q\n%s", argv, env)
	}
	if !strings.Contains(rc, "Remove-Module PSReadLine") || !regexp.MustCompile("`e\\]133;A;dsh=[0-9a-f]{16}`aPS> ").MatchString(rc) {
		t.Fatalf("the rc text on fd 3: %q", rc)
	}
	f.Saw("PowerShell's arguments, a plain environment with the DSH_* facts and no prompt mark, the rc on fd 3; its exit 7 said, an error")

	f = fault(t, "persistent pwsh: the next call after the shell exited (a stand-in)")
	if text, _ = ppwsh(t, ctx, a, "Get-Date"); !strings.HasPrefix(text, noteFresh+"\n[the shell exited with code 7") {
		t.Fatalf("the call after: %q", text)
	}
	f.Saw("a fresh shell, said, and its exit")
}

// One agent's persistent PowerShell through dsh serve, the real plugins
// and a real pwsh, a command after each way one can end: state carries
// over (the location, $env:, a function, a job); exit codes; a terminating
// error ends the command, not the session; a timeout closes the session
// and the next command gets a fresh one; so does exit; so does the model's
// terminal_close. Only where pwsh is installed.
func TestPersistentPwsh(t *testing.T) {
	testneeds.Command(t, "pwsh")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := startHTTP(t, pwshComp(t))
	a := s.connect(t, ctx)
	dir := t.TempDir()
	for _, name := range []string{"b.txt", "a.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	f := fault(t, "persistent pwsh: state between calls")
	if text, r := ppwsh(t, ctx, a, "Set-Location '"+dir+"'; $env:KEPT = 'yes'; function f { 'from-f' }; $j = Start-Job { 'from-job' }"); text != noteFresh || r.IsError {
		t.Fatalf("Set-Location, $env:, a function, a job: %q", text)
	}
	text, _ := ppwsh(t, ctx, a, "$PWD.Path; $env:KEPT; f; $env:DSH_COMPOSITION; Receive-Job $j -Wait")
	if text != dir+"\nyes\nfrom-f\npwsh-persistent\nfrom-job" {
		t.Fatalf("the state of the session: %q", text)
	}
	// Formatted output is printed before the end, in order.
	if text, _ = ppwsh(t, ctx, a, "Get-ChildItem | Select-Object Name; 'after the table'"); !regexp.MustCompile(`(?s)a\.txt.*b\.txt.*after the table$`).MatchString(text) {
		t.Fatalf("a table, then a line: %q", text)
	}
	f.Saw("location, $env:, a function and a job carry over; the DSH_* facts are there; a table comes whole before the end")

	f = fault(t, "persistent pwsh: how commands end")
	for _, c := range []struct{ command, want string }{
		{"sh -c 'exit 3'", "[exit code: 3]"},
		{"'no newline' | Write-Host -NoNewline; sh -c 'exit 4'", "no newline\n[exit code: 4]"},
		{"Get-Item /nonexistent-" + filepath.Base(dir), "[exit code: 1]"},
		{"'before'; throw 'thrown'; 'not' + ' reached'", "[exit code: 1]"},
		{"$x = [int]::Parse('nope'); 'went on'", "went on"},
		{"sh -c 'exit 3'; 'last ok'", "last ok"},
	} {
		text, r := ppwsh(t, ctx, a, c.command)
		if !strings.HasSuffix(text, c.want) || strings.Contains(text, "not reached") || r.IsError != strings.HasPrefix(c.want, "[exit code") {
			t.Fatalf("%s: %q", c.command, text)
		}
	}
	if text, _ = ppwsh(t, ctx, a, "$env:KEPT"); text != "yes" {
		t.Fatalf("the session after a terminating error: %q", text)
	}
	f.Saw("exit codes of native programs, 1 for a failed cmdlet and a throw (the session kept), $? of the last statement")

	f = fault(t, "persistent pwsh: a command waits for input")
	text, r := ppwsh(t, ctx, a, "'before'; Read-Host 'name?'", "timeoutMs", 10000)
	waited := strings.Contains(text, "[no end yet: the command waits for input (")
	if !strings.HasPrefix(text, "before") || waited == r.IsError || !waited && !strings.Contains(text, "[timed out after 10000ms") {
		t.Fatalf("a command that reads: %q", text)
	}
	text, _ = ppwsh(t, ctx, a, "'after'")
	if waited && text != "[the previous command was still running: it was interrupted (Ctrl-C) first]\nafter" || !waited && text != noteFresh+"\nafter" {
		t.Fatalf("the command after one that read: %q", text)
	}
	f.Saw("partial output and a wait for input (seen: %v); the next command ran", waited)
	if !waited {
		ppwsh(t, ctx, a, "Set-Location '"+dir+"'; $env:KEPT = 'yes'")
	}

	f = fault(t, "persistent pwsh: a timeout closes the session")
	text, _ = ppwsh(t, ctx, a, "'started'; Start-Sleep 30", "timeoutMs", 2000)
	if text != "started\n[timed out after 2000ms: the shell was closed with everything it ran; the next command starts in a fresh shell (working directory and variables reset)]" {
		t.Fatalf("a timeout: %q", text)
	}
	if text, _ = ppwsh(t, ctx, a, "\"[$env:KEPT]\""); text != noteFresh+"\n[]" {
		t.Fatalf("after a timeout: %q", text)
	}
	f.Saw("timed out, session closed; the next command ran in a fresh one")

	f = fault(t, "persistent pwsh: exit")
	ppwsh(t, ctx, a, "$env:AGAIN = '1'")
	text, _ = ppwsh(t, ctx, a, "'bye'; exit 3")
	if !strings.HasPrefix(text, "bye\n") || !strings.HasSuffix(text, "[the shell exited with code 3: the next command starts in a fresh shell (working directory and variables reset)]") {
		t.Fatalf("exit: %q", text)
	}
	if text, _ = ppwsh(t, ctx, a, "\"[$env:AGAIN]\""); text != noteFresh+"\n[]" {
		t.Fatalf("after exit: %q", text)
	}
	f.Saw("exit 3 reported; the next command ran in a fresh session")

	f = fault(t, "persistent pwsh: the model closes the session")
	list, _ := callText(t, ctx, a, "terminal_list", map[string]any{})
	m := pwshListIDRE.FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("terminal_list: %s", list)
	}
	callText(t, ctx, a, "terminal_close", map[string]any{"session_id": m[1]})
	if text, _ = ppwsh(t, ctx, a, "'reopened'"); text != "[the shell was closed since the last command: this command runs in a fresh one (working directory and variables reset)]\nreopened" {
		t.Fatalf("after terminal_close: %q", text)
	}
	f.Saw("the next command said so and ran in a fresh session")

	f = fault(t, "persistent pwsh: kill -9 of tool-pwsh-persistent between calls")
	ppwsh(t, ctx, a, "$env:KEPT = 'kept'")
	killed(t, pluginPid(t, "tool-pwsh-persistent"), syscall.SIGKILL)
	if text, _ = ppwsh(t, ctx, a, "$env:KEPT"); text != "kept" {
		t.Fatalf("after kill -9 of the tool's plugin: %q", text)
	}
	f.Saw("the restarted plugin found the agent's session: its state is there")
}

// Nothing a command defines or prints in its session alters what the tool
// reports: functions and aliases named like what the lines use, or like
// the prompt; end markers made from every nonce the command can read (the
// line that runs it, the call stack, the history, its errors); a done
// marker printed early, and a reader of the next line typed, close the
// session as untrusted, said. Only where pwsh is installed.
func TestPersistentPwshHijacks(t *testing.T) {
	testneeds.Command(t, "pwsh")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := startHTTP(t, pwshComp(t))
	a := s.connect(t, ctx)
	ppwsh(t, ctx, a, "$env:KEPT = 'k1'")
	normal := func(after string) {
		t.Helper()
		if text, _ := ppwsh(t, ctx, a, `"$env:KEPT"; sh -c 'exit 3'`); text != "k1\n[exit code: 3]" {
			t.Fatalf("the command after %s: %q", after, text)
		}
	}
	for _, hijack := range []string{
		"function global:Out-Default { }",
		"Set-Alias -Name Out-Default -Value Out-Null -Scope Global",
		"function global:prompt { 'x> ' }",
		"Set-Alias -Name prompt -Value Get-Date -Scope Global -Force",
		"function global:Write-Host { }; function global:Out-String { }; function global:ForEach-Object { }; function global:Remove-Variable { }",
		"Set-StrictMode -Version Latest; $ErrorActionPreference = 'Stop'",
	} {
		f := fault(t, "persistent pwsh: "+hijack)
		ppwsh(t, ctx, a, hijack)
		normal(hijack)
		f.Saw("the next command ran as typed, with its own output and status")
	}
	ppwsh(t, ctx, a, "Remove-Item function:Out-Default, function:prompt, function:Write-Host, function:Out-String, function:ForEach-Object, function:Remove-Variable, alias:Out-Default -ErrorAction Ignore; Set-StrictMode -Off; $ErrorActionPreference = 'Continue'")

	f := fault(t, "persistent pwsh: end markers from every nonce the command can read")
	forge := `$seen = ($MyInvocation.Line, ((Get-PSCallStack).InvocationInfo.Line), ((Get-History).CommandLine), ($Error | ForEach-Object { $_.InvocationInfo.Line })) -join ' '; ` +
		`foreach ($n in [regex]::Matches($seen, '[0-9a-f]{24}').Value) { [Console]::Out.Write("` + "`n" + `__DSH_PERSISTENT_PWSH_END_${n}:0` + "`n" + `") }; Start-Sleep -Milliseconds 500; 'after-mark'; sh -c 'exit 5'`
	text, r := callText(t, ctx, a, "pwsh", map[string]any{"command": forge, "description": "d"})
	if !strings.HasSuffix(text, "\nafter-mark\n[exit code: 5]") || !r.IsError {
		t.Fatalf("a command printing end markers: %q", text)
	}
	f.Saw("the call went on to the command's true end and status")

	f = fault(t, "persistent pwsh: a done marker printed early")
	early := `foreach ($n in [regex]::Matches($MyInvocation.Line, '[0-9a-f]{24}').Value) { [Console]::Out.Write("` + "`n" + `__DSH_PERSISTENT_PWSH_DONE_${n}:ok` + "`n" + `") }; Start-Sleep -Milliseconds 500; sh -c 'exit 5'`
	text, r = callText(t, ctx, a, "pwsh", map[string]any{"command": early, "description": "d"})
	if !strings.Contains(text, noteUntrusted) || !r.IsError || strings.Contains(text, "[exit code: 0]") {
		t.Fatalf("a command printing a done marker: %q", text)
	}
	if text, _ = ppwsh(t, ctx, a, "\"[$env:KEPT]\""); text != noteFresh+"\n[]" {
		t.Fatalf("after it: %q", text)
	}
	f.Saw("no status given for it, the session closed as untrusted; a fresh one, said")

	f = fault(t, "persistent pwsh: a reader of the next line")
	ppwsh(t, ctx, a, "$env:KEPT = 'k1'")
	text, r = ppwsh(t, ctx, a, "function global:PSConsoleHostReadLine { [Console]::ReadLine() }")
	if !strings.Contains(text, noteUntrusted) || !r.IsError {
		t.Fatalf("a command defining PSConsoleHostReadLine: %q", text)
	}
	if text, _ = ppwsh(t, ctx, a, "\"[$env:KEPT]\""); text != noteFresh+"\n[]" {
		t.Fatalf("after it: %q", text)
	}
	f.Saw("the session closed as untrusted before the end nonce was typed; a fresh one, said")

	f = fault(t, "persistent pwsh: where the prompt's mark could be read")
	// The session's processes: the shell, what it runs, and what the lines
	// would start (other processes of the machine are not this test's).
	hunt := `$sid = { param($p) $s = [IO.File]::ReadAllText("/proc/$p/stat"); ($s.Substring($s.LastIndexOf(')') + 2) -split ' ')[3] }; $mine = & $sid $PID; ` +
		`Get-ChildItem /proc -Directory | Where-Object Name -match '^\d+$' | Where-Object { try { (& $sid $_.Name) -eq $mine } catch { $false } } | ` +
		`ForEach-Object { foreach ($f in 'cmdline', 'environ') { try { [IO.File]::ReadAllText("$($_.FullName)/$f") } catch { } } } | Where-Object { $_.Contains('133;A') } | Measure-Object | ForEach-Object Count`
	if text, _ = ppwsh(t, ctx, a, hunt); text != "0" {
		t.Fatalf("the prompt's mark in a command line or an environment: %q", text)
	}
	f.Saw("no process's command line or environment holds the prompt's mark")
}
