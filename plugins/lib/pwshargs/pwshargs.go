// Package pwshargs builds the argv that runs a script in PowerShell 7
// (pwsh) without a profile or prompts, the script passed as
// -EncodedCommand: base64 of its UTF-16LE text, so that no quoting of
// Windows' command line (nor of the shell that parses it) can change it.
// The argv needs no quoting at all: its flags are fixed words and base64
// has no space, quote or backslash, so os/exec's own escaping leaves it
// as it is.
package pwshargs

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf16"
)

// Flags run pwsh for one script: no banner, no profile (a user's profile
// could print, prompt or take seconds), no interactive prompt (a command
// that would ask fails instead of waiting for input that never comes).
var Flags = []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-EncodedCommand"}

// MaxCommandLine is the longest command line CreateProcess takes, in
// UTF-16 code units with its terminating NUL: 32767.
const MaxCommandLine = 32767

// EncodePowerShellCommand is script as -EncodedCommand takes it: its text
// in UTF-16LE (what .NET calls Unicode), in standard base64. Bytes that are
// not UTF-8 become U+FFFD.
func EncodePowerShellCommand(script string) string {
	units := utf16.Encode([]rune(script))
	b := make([]byte, 2*len(units))
	for i, u := range units {
		b[2*i], b[2*i+1] = byte(u), byte(u>>8)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Argv is the argv that runs script with the pwsh at path. It fails when
// the command line would be longer than Windows takes (a script of about
// 12,000 ASCII characters: each becomes 2.67 of base64).
func Argv(path, script string) ([]string, error) {
	argv := append([]string{path}, Flags...)
	argv = append(argv, EncodePowerShellCommand(script))
	if n := commandLineBound(argv); n > MaxCommandLine {
		return nil, fmt.Errorf("the script is too long for a Windows command line: %d characters encoded, at most %d (give it in a file instead)", n, MaxCommandLine)
	}
	return argv, nil
}

// commandLineBound is at least the length, in UTF-16 code units, of argv
// as Windows' command line with its NUL: each argument quoted if it needs
// to be, every backslash doubled (more than escaping ever adds, as a path
// holds no quote), a space between.
func commandLineBound(argv []string) int {
	n := 1
	for i, a := range argv {
		if i > 0 {
			n++
		}
		units := len(utf16.Encode([]rune(a)))
		if a == "" || strings.ContainsAny(a, " \t\"") {
			n += 2
		}
		n += units + strings.Count(a, `\`) + 2*strings.Count(a, `"`)
	}
	return n
}
