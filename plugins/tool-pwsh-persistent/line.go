package main

import (
	"encoding/base64"
	"strings"
)

// The markers around a command's output. The start marker and the done
// marker carry the start nonce, which the command can read (it is in the
// line that runs it); the end marker carries the end nonce, typed only
// after the command has ended.
func startMarker(nonce string) string { return "__DSH_PERSISTENT_PWSH_START_" + nonce + "__" }
func doneMarker(nonce string) string  { return "__DSH_PERSISTENT_PWSH_DONE_" + nonce }
func endMarker(nonce string) string   { return "__DSH_PERSISTENT_PWSH_END_" + nonce + ":" }

// lostStatus is what the done marker carries, in place of ok, when the
// session would let something the command defined read the next line
// typed (a PSConsoleHostReadLine of its own).
const lostStatus = "lost"

// nestedStatus is what the end marker carries, in place of a status, when
// the confirming line ran in a nested prompt or a debugger stop
// ($Host.EnterNestedPrompt(), Wait-Debugger, a breakpoint): the command
// has not ended, it waits under a prompt that looks like the session's
// own.
const nestedStatus = "nested"

// A command is typed as two lines, each one line of printable ASCII (the
// console host's own line reader drops control characters and ignores a
// Tab) that looks up nothing a command can define, or only so that the
// call fails rather than lies.
//
// commandLine runs the command (however many lines it has) in the global
// scope, between the start marker and the done marker:
//
//   - It sets a variable of the call's own ($global:__dsh_<start nonce>)
//     to $null and $LASTEXITCODE to 0, and prints the start marker. The
//     markers are printed with [System.Console]::Out.Write, a .NET method
//     of a type named in full: no function, alias or cmdlet of PowerShell
//     is looked up to print them, and no Out-Default a command defines
//     sees them. They are assembled from quoted pieces, so the line as
//     echoed (or shown in an error's position message) holds neither.
//   - The command travels as base64 of its UTF-8 text, decoded with .NET
//     methods, made a script block ([ScriptBlock]::Create) and
//     dot-sourced, so it runs in the global scope as typed (Set-Location,
//     $env:, functions, variables and jobs stay), and the line reader
//     sees none of its characters. Its text gets one more line, which sets
//     the call's variable to $? after its last statement; the line starts
//     with a semicolon, which ends a last line the command continued with
//     a backtick. Its output goes
//     through Microsoft.PowerShell.Core\Out-Default within the line, named
//     with its module so no function or alias of that name is taken, so
//     that what the formatter holds back (a table waits for its rows) is
//     printed before the done marker; native programs stay on the terminal
//     (PowerShell redirects none whose output goes to Out-Default).
//   - After it the call's variable is $? of the command as a whole when
//     its last line did not run (the script block did not parse, or it
//     returned early), and the done marker is printed with ok, or
//     lostStatus when a function or cmdlet named PSConsoleHostReadLine
//     exists: the console host would hand it the next line typed, with
//     the end nonce in it.
//   - Nothing in it catches errors (a trap or try would turn the
//     command's statement-terminating errors, a .NET exception, 1/0, into
//     ones that end it). A terminating error (throw) ends what is left of
//     the line, as typed at the prompt: the done marker does not come,
//     the session is back at its prompt, and the call's variable stays
//     $null.
//
// confirmLine, typed once the done marker came or the session is back at
// its prompt without it, prints the done marker again and then the end
// marker, with the command's status: 0 when its last statement succeeded
// ($?), else $LASTEXITCODE when a number not 0 (a native program's exit
// code, or a script's exit N; a command may set it to anything, which
// would not read as a status), else 1 (a cmdlet's failure, a terminating
// error). In a nested prompt or a debugger stop the status is
// nestedStatus, which reads as none: the prompt there looks like the
// session's own, the line runs inside the command, and the session is
// closed as untrusted. $PSDebugContext, set only in a debugger stop, is
// read with the session state's own lookup, which a Set-StrictMode of the
// command's does not turn into an error for a variable not set. It removes
// the call's variable. The end nonce is typed here only, after the command
// has ended: the command cannot find it in the line that ran it
// ($MyInvocation.Line, Get-PSCallStack, an error's InvocationInfo), in the
// history (Get-History), in a variable or in the environment, so a command
// that prints an end marker, even one made from what it can read, does not
// end its call. A done marker the command printed itself ends the first
// wait early, and then shows: the true one comes after it, before this
// line's own, and the session is closed as untrusted.
//
// Out of reach, as the shell is the command's: a command that sets out to
// impersonate the wrapper from inside the session, reading the line that
// runs it to print the done marker and then reading the next line itself
// (Read-Host), or printing the prompt's mark (its function is readable)
// and reading, or changing the call's variable, or defining
// PSConsoleHostReadLine and then ending the line with an error, or
// reaching into the runspace through .NET (another runspace, breakpoint
// and event actions, type accelerators, [Console]::SetOut).
func commandLine(command, start string) string {
	v := `$global:__dsh_` + start
	script := base64.StdEncoding.EncodeToString([]byte(command + "\n;" + v + "=$?"))
	return v + `=$null;$global:LASTEXITCODE=0;` +
		`[System.Console]::Out.Write('__DSH_PERSISTENT_PWSH'+'_START_` + start + `__'+"` + "`n" + `");` +
		`. ([System.Management.Automation.ScriptBlock]::Create([System.Text.Encoding]::UTF8.GetString([System.Convert]::FromBase64String('` + script + `')))) | Microsoft.PowerShell.Core\Out-Default;` +
		// The array is made before it is indexed: $? is still the
		// pipeline's.
		v + `=(` + v + `,$?)[$null -eq ` + v + `];` +
		`[System.Console]::Out.Write("` + "`n" + `"+'__DSH_PERSISTENT_PWSH'+'_DONE_` + start + `:'+$(if(@($ExecutionContext.InvokeCommand.GetCommands('PSConsoleHostReadLine','Function,Cmdlet',$false)).Count){'` + lostStatus + `'}else{'ok'})+"` + "`n" + `")`
}

// confirmLine is the line typed after the command has ended: see
// commandLine.
func confirmLine(start, end string) string {
	v := `$global:__dsh_` + start
	return `[System.Console]::Out.Write("` + "`n" + `"+'__DSH_PERSISTENT_PWSH'+'_DONE_` + start + `'+"` + "`n" + `"+'__DSH_PERSISTENT_PWSH'+'_END_` + end + `:'+$(if($NestedPromptLevel -or $ExecutionContext.SessionState.PSVariable.GetValue('PSDebugContext')){'` + nestedStatus + `'}elseif(` + v + `){0}elseif($global:LASTEXITCODE -is [int] -and $global:LASTEXITCODE){$global:LASTEXITCODE}else{1})+"` + "`n" + `");` +
		`$ExecutionContext.SessionState.PSVariable.Remove('` + strings.TrimPrefix(v, "$global:") + `')`
}
