package pwshargs

import (
	"strconv"
	"strings"
)

// Prelude is what a script sets before the command runs, one statement a
// line. $ErrorActionPreference keeps its default: a failed cmdlet does not
// stop the command, as a failed program does not stop bash.
//
//   - $ProgressPreference: no progress records, which PowerShell would
//     otherwise draw on the terminal or write to stderr as CLIXML.
//   - UTF-8 without a byte order mark both ways: $OutputEncoding is what
//     PowerShell writes into a program's stdin, [Console]::OutputEncoding
//     what it writes and how it reads a program's output, InputEncoding
//     how it reads its own stdin. Windows starts them at the console's
//     code page, and Linux at what LANG says. Setting the console's fails
//     where there is no console (a process started without one) and under
//     the constrained language: the defaults stay, and the error is
//     cleared so no command sees it. On Windows the console's code pages
//     are the console's, shared with the program that started PowerShell
//     and every other process attached to it: they are saved here and
//     restored once the command ended (restore).
//   - $PSStyle.OutputRendering: plain text, no escape sequences (Windows
//     PowerShell 5.1 has no $PSStyle, and writes none). The constrained
//     language refuses the setting: rendering stays as it is, and the
//     error that refusal records is removed.
//   - $ErrorView: an error as one short record (PowerShell 7's default,
//     set again in case; 5.1 has no ConciseView).
//
// $__dshRan, the command's success as the epilogue reads it, starts false.
const Prelude = "$ProgressPreference='SilentlyContinue'\n" +
	"$__dshRan=$false;$__dshOut=$__dshIn=$null\n" +
	"try{if(-not($IsLinux -or $IsMacOS)){$__dshOut=[Console]::OutputEncoding;$__dshIn=[Console]::InputEncoding};$OutputEncoding=[Text.UTF8Encoding]::new($false);[Console]::OutputEncoding=$OutputEncoding;[Console]::InputEncoding=$OutputEncoding}catch{$Error.Clear()}\n" +
	"if($PSStyle){try{$PSStyle.OutputRendering='PlainText'}catch{$Error.RemoveAt(0)}}\n" +
	"if($PSVersionTable.PSVersion.Major -ge 7){$ErrorView='ConciseView'}\n"

// status is the statement that follows the command in its own text: it
// reads into $__dshExit 0 when $? is true, else $LASTEXITCODE when that is
// a non-zero integer, else 1: close to bash's status of its last command.
// $? is the last statement's that sets it (if, foreach, switch, try and
// function statements do not), and $LASTEXITCODE the last program's,
// however long ago it ran. PowerShell's own -Command ends with 1 for a
// program's failure, whatever its code. The
// leading semicolon ends a last line the command continued with a
// backtick. Test-Path, not $LASTEXITCODE alone: under Set-StrictMode an
// unset variable is an error.
const status = ";$__dshExit=if($?){0}elseif((Test-Path variable:LASTEXITCODE) -and $LASTEXITCODE -is [int] -and $LASTEXITCODE -ne 0){$LASTEXITCODE}else{1}"

// restore gives the console back the code pages the prelude saved (none
// outside Windows); one that cannot be set back stays as it is.
const restore = "try{if($__dshOut){[Console]::OutputEncoding=$__dshOut};if($__dshIn){[Console]::InputEncoding=$__dshIn}}catch{}"

// Epilogue ends the script with the command's status. The command's text
// and status run in one Invoke-Expression: $? is then its last statement's,
// errors name its own lines, and `exit N` in it ends PowerShell with N
// before anything here runs. Its output goes through an Out-Default of its
// own that ends with it, so the exit below cannot drop a table PowerShell
// still held back to size its columns (the implicit formatting of the
// -Command text as a whole would). That pipeline is in a try whose finally
// restores the console's code pages however the command ends: the finally
// runs on `exit N` and on an uncaught throw too, which still end
// PowerShell with N and 1. $? is read into $__dshRan inside the try, since
// after a try statement $? is its finally's last statement's. A command
// that never reached the status (a `return`, or text that does not parse)
// ends with 0, or with 1 when Invoke-Expression failed (then $__dshRan
// keeps the prelude's false).
const Epilogue = "if(Test-Path variable:__dshExit){exit $__dshExit}\n" +
	"exit [int](-not $__dshRan)\n"

// Script is the script that runs command: the prelude, the command and its
// status through Invoke-Expression, and the epilogue.
func Script(command string) string { return scriptOf(Quote(command)) }

// ScriptFromFD is the script that runs the command read, as UTF-8, from
// descriptor fd (a pipe the caller writes the command to). Reading opens
// the pipe anew; fd itself is then closed, as bash's script closes it, so
// nothing the command starts inherits it.
func ScriptFromFD(fd int) string {
	n := strconv.Itoa(fd)
	return scriptOf("$(try{[IO.File]::ReadAllText('/dev/fd/" + n + "')}finally{[Microsoft.Win32.SafeHandles.SafeFileHandle]::new([IntPtr]" + n + ",$true).Dispose()})")
}

// ScriptFromFile is the script that runs the command read, as UTF-8, from
// the file at path, which it removes as soon as it has read it (before the
// command starts, so a background command leaves no file behind). Cmdlets,
// not .NET's methods, read and remove it: the constrained language refuses
// those methods.
func ScriptFromFile(path string) string {
	p := Quote(path)
	return scriptOf("$(try{Get-Content -LiteralPath " + p + " -Raw -Encoding UTF8}finally{Remove-Item -LiteralPath " + p + " -Force})")
}

// scriptOf is the script running the command that the PowerShell
// expression source gives.
func scriptOf(source string) string {
	return Prelude + "try{Invoke-Expression (" + source + "+\"`n\"+" + Quote(status) + ")|Out-Default;$__dshRan=$?}finally{" + restore + "}\n" + Epilogue
}

// Quote is s as a PowerShell single-quoted string literal: nothing in it
// is expanded. Within one PowerShell takes the typographic single quotes
// (U+2018 to U+201B) for ASCII ones too, so each of them is doubled.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for _, r := range s {
		b.WriteRune(r)
		if isQuote(r) {
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func isQuote(r rune) bool { return r == '\'' || (r >= '\u2018' && r <= '\u201b') }
