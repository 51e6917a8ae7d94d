package main

import "strings"

// The dialects a session may speak (config.ShellDialect).
const (
	dialectBash = "bash"
	dialectPwsh = "pwsh"
)

// PwshArgv is the shell a pwsh session runs: a POSIX sh that takes the
// session's rc text from the environment variable rcVar, drops the
// variable, and becomes shell (PowerShell 7) with the text on fd 3 (a
// here-document: a pipe), so the prompt's nonce is in neither
// PowerShell's environment (/proc/PID/environ keeps what exec was given)
// nor its command line, nor its children's. PowerShell runs interactive
// (a PTY session) without a profile or a banner; its one command reads
// the rc text from fd 3 and runs it in the global scope, and the rc
// closes fd 3.
func PwshArgv(shell string) []string {
	return []string{"/bin/sh", "-c",
		`r=$` + rcVar + `;unset ` + rcVar + `;exec "$0" -NoLogo -NoProfile -NoExit -Command "$1" 3<<E` + "\n$r\nE\n",
		shell, pwshBoot}
}

// pwshBoot is PowerShell's -Command: it runs the rc text on fd 3 in the
// global scope (dot-sourced).
const pwshBoot = `. ([System.Management.Automation.ScriptBlock]::Create([System.IO.File]::ReadAllText('/dev/fd/3')))`

// PwshPrompt is a pwsh session's prompt: the PowerShell text of the
// function that prints it, and the bytes printed: the mark a bash prompt
// has (an OSC 133 prompt mark naming the session's own nonce), then
// "PS> ".
func PwshPrompt(nonce string) (function string, printed []byte) {
	return "{ \"`e]133;A;dsh=" + nonce + "`aPS> \" }", []byte("\x1b]133;A;dsh=" + nonce + "\aPS> ")
}

// PwshRC is a pwsh session's rc text, run once as the shell starts:
//
//   - PSReadLine goes. The console host loads it for an interactive
//     shell, and it does not take raw typing as typed: it saves every
//     line to a history file on disk (what was typed into a session
//     outlives it, for any later command to read), draws predictions and
//     colours into the line as it is typed, and runs key handlers a
//     command may rebind (Set-PSReadLineKeyHandler), which then see and
//     change every line typed after. Without it the host reads a line
//     with its own plain reader: printable characters, Enter, Ctrl-C.
//   - Output is plain text ($PSStyle.OutputRendering; NO_COLOR is in the
//     environment too, for PowerShell 7.2 and later and other programs),
//     and the console reads and writes UTF-8.
//   - No progress bars ($ProgressPreference): PowerShell would draw them
//     over the screen's top lines, reading the cursor's position from the
//     terminal first, and what a command prints would come mixed with
//     them.
//   - The prompt is prompt's function, a constant function under a
//     constant alias named prompt, which the host's lookup of prompt finds
//     before any function: a command that defines its own prompt (a
//     virtual environment's activation script does) cannot replace it and
//     blind the registry, nor fail for trying.
//   - fd 3, which brought this text, is closed: nothing the shell starts
//     inherits it.
func PwshRC(prompt string) string {
	return strings.Join([]string{
		`Remove-Module PSReadLine -ErrorAction Ignore`,
		`if ($PSStyle) { $PSStyle.OutputRendering = 'PlainText' }`,
		`$ProgressPreference = 'SilentlyContinue'`,
		`[Console]::InputEncoding = [System.Text.UTF8Encoding]::new($false)`,
		`[Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false)`,
		`$OutputEncoding = [System.Text.UTF8Encoding]::new($false)`,
		`New-Item -Path function:__dsh_prompt -Options Constant -Value ` + prompt + ` > $null`,
		`Set-Alias -Name prompt -Value __dsh_prompt -Option Constant -Scope Global`,
		`[Microsoft.Win32.SafeHandles.SafeFileHandle]::new([IntPtr]3, $true).Dispose()`,
	}, "\n") + "\n"
}

// PwshEnv is a pwsh session's environment over the host's: its rc text
// (for the sh that starts PowerShell, which drops it), the terminal type,
// no colours, and PowerShell's update check and telemetry off (a session
// makes no network call of its own).
func PwshEnv(rc, term string) map[string]string {
	return map[string]string{
		rcVar:                         rc,
		"TERM":                        term,
		"NO_COLOR":                    "1",
		"POWERSHELL_UPDATECHECK":      "Off",
		"POWERSHELL_TELEMETRY_OPTOUT": "1",
	}
}
