// Package pwshargs is how a command reaches PowerShell: the script that
// runs it (a prelude that fixes encodings, rendering and progress, the
// command, and the exit status it leaves), quoted for PowerShell's parser
// and encoded for its -EncodedCommand parameter.
//
// The command travels as -EncodedCommand, the script's UTF-16LE bytes in
// base64, rather than as -Command text: base64 holds no quote, space or
// backslash, so neither Windows' command-line splitting
// (CommandLineToArgvW) nor PowerShell's own reading of -Command arguments
// (which joins them with spaces and parses the result again) can change
// it. The price is length: a script of n UTF-16 units is 8n/3 characters
// (MaxInline).
package pwshargs

import (
	"encoding/base64"
	"errors"
	"unicode/utf16"
)

// EncodeCommand is script as -EncodedCommand takes it: base64 of its
// UTF-16LE bytes, without a byte order mark.
func EncodeCommand(script string) string {
	units := utf16.Encode([]rune(script))
	b := make([]byte, 2*len(units))
	for i, u := range units {
		b[2*i], b[2*i+1] = byte(u), byte(u>>8)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeCommand is what PowerShell runs of an -EncodedCommand argument.
func DecodeCommand(enc string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", err
	}
	if len(b)%2 != 0 {
		return "", errors.New("an odd number of bytes is no UTF-16 text")
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return string(utf16.Decode(u)), nil
}

// Argv is the command line that runs script with program (pwsh, or
// Windows PowerShell's powershell.exe): no banner, no profile (the user's
// profile is for their own sessions: it may print, prompt or be slow), and
// nothing interactive (a command that would prompt fails instead).
// -OutputFormat Text: with -EncodedCommand, no terminal and stderr
// redirected, PowerShell otherwise writes errors, warnings and verbose
// text to stderr as CLIXML; pwsh 6.2 and later honour Text there, Windows
// PowerShell 5.1 may not.
func Argv(program, script string) []string {
	return []string{program, "-NoLogo", "-NoProfile", "-NonInteractive", "-OutputFormat", "Text", "-EncodedCommand", EncodeCommand(script)}
}

// MaxInline is the longest command, in bytes, that goes in the command
// line as Script(command). Windows takes a command line of at most 32,767
// UTF-16 units: the worst command this long, every byte a quote that
// Quote doubles, makes a script of 2×4,096 units plus the prelude and the
// epilogue, about 24,000 characters encoded, which leaves the program's
// path room to be long. A longer command reaches PowerShell another way
// (ScriptFromFD, ScriptFromFile).
const MaxInline = 4 << 10
