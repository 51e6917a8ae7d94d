// Command dsh-tool-pwsh is the model-facing PowerShell tool: it registers
// `pwsh`, `job_output`, `job_kill` and `job_list` with ctx.tools, runs commands through
// ctx.shell (whichever executor is composed: pwsh-local runs them in
// PowerShell), hands background processes to ctx.jobs, and gives each
// execution one trusted DSH_* snapshot from ctx.shellEnv. The tool is
// shelltool's, as tool-bash's is; what it says of PowerShell is here.
package main

import (
	"github.com/dshrun/dsh/plugins/lib/shelltool"
	"github.com/dshrun/dsh/sdk"
)

var pwsh = shelltool.Shell{
	Plugin:     "tool-pwsh",
	Version:    "0.1.0",
	Summary:    "the model-facing PowerShell tool, with background jobs",
	Tool:       "pwsh",
	Title:      "Run a PowerShell command",
	Command:    "The PowerShell command to run.",
	ChangeDir:  "Set-Location",
	Session:    "a fresh PowerShell session",
	Intro:      intro,
	ReadSpill:  "Select-String, Get-Content -Tail",
	ReadBinary: "write it to a file and read that with Format-Hex",
}

// intro opens the PowerShell description: each call runs in session; then
// the idioms a model used to bash gets wrong in PowerShell.
func intro(session string) string {
	return `Run a PowerShell command and return its output.

- Each call runs in ` + session + `: the location, variables and functions do not carry over. Pass ` + "`workdir`" + ` instead of using Set-Location.
- No terminal and stdin is closed: Read-Host and anything else that prompts fails instead of waiting (pass -Force or -Confirm:$false).
- Write PowerShell: Get-ChildItem, Get-Content, Select-String; ` + "`$env:NAME`" + ` for an environment variable; ` + "`;`" + ` between statements. ` + "`exit N`" + ` sets the exit code; a native program's is in ` + "`$LASTEXITCODE`" + ` (end with ` + "`; exit $LASTEXITCODE`" + ` to pass it on).
- Quoting: '...' is literal ('' for a quote in it), "..." expands ` + "`$name`" + ` and ` + "`$(...)`" + `; the escape character is the backtick, not the backslash.
- Start-Job and a trailing ` + "`&`" + ` end with the call: use ` + "`run_in_background`" + ` instead.`
}

func main() { sdk.Serve(shelltool.New(pwsh)) }
