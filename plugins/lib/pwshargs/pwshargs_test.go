package pwshargs

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestEncodePowerShellCommand(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		// The example of pwsh's own help (about_Pwsh, -EncodedCommand).
		{`dir "c:\program files" `, "ZABpAHIAIAAiAGMAOgBcAHAAcgBvAGcAcgBhAG0AIABmAGkAbABlAHMAIgAgAA=="},
		{"Write-Output 'hi'", "VwByAGkAdABlAC0ATwB1AHQAcAB1AHQAIAAnAGgAaQAnAA=="},
		{"", ""},
		{"Get-ChildItem | Where-Object { $_.Length -gt 1kb }", "RwBlAHQALQBDAGgAaQBsAGQASQB0AGUAbQAgAHwAIABXAGgAZQByAGUALQBPAGIAagBlAGMAdAAgAHsAIAAkAF8ALgBMAGUAbgBnAHQAaAAgAC0AZwB0ACAAMQBrAGIAIAB9AA=="},
		{`echo "é ü 日本"`, "ZQBjAGgAbwAgACIA6QAgAPwAIADlZSxnIgA="},
		{"echo 😀", "ZQBjAGgAbwAgAD3YAN4="}, // a surrogate pair, low unit first in each
		{"a\r\nb\x00c", "YQANAAoAYgAAAGMA"},
		{"\xff", "/f8="}, // not UTF-8: U+FFFD
	} {
		if got := EncodePowerShellCommand(tc.script); got != tc.want {
			t.Errorf("EncodePowerShellCommand(%q) = %q, want %q", tc.script, got, tc.want)
		}
	}
}

// decode is what pwsh does with -EncodedCommand.
func decode(t *testing.T, s string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%2 != 0 {
		t.Fatalf("%q is not base64 of UTF-16: %v", s, err)
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return string(utf16.Decode(u))
}

func TestRoundTrip(t *testing.T) {
	for _, s := range []string{
		"", "x", "xy", "xyz", // every base64 padding
		"$env:PATH -split ';'", "'single' \"double\" `backtick", `C:\trailing\`,
		"line1\nline2\r\n\ttab", "日本語 😀 𝄞", strings.Repeat("ab", 5000),
	} {
		if got := decode(t, EncodePowerShellCommand(s)); got != s {
			t.Errorf("round trip of %q gave %q", s, got)
		}
	}
}

func TestArgv(t *testing.T) {
	argv, err := Argv(`C:\Program Files\PowerShell\7\pwsh.exe`, "Get-Date")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`C:\Program Files\PowerShell\7\pwsh.exe`, "-NoLogo", "-NoProfile", "-NonInteractive", "-EncodedCommand", "RwBlAHQALQBEAGEAdABlAA=="}
	if !slices.Equal(argv, want) {
		t.Fatalf("Argv = %q, want %q", argv, want)
	}
	// What follows the program needs no quoting: Windows' escaping
	// (CommandLineToArgvW's rules) leaves an argument with no space,
	// tab, quote or backslash, and not empty, as it is.
	for _, s := range []string{"", "'", `"`, `\`, "$(rm -rf /)", "a b\tc", strings.Repeat(`\"`, 100)} {
		argv, err := Argv("pwsh", s)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range argv[1:] {
			if a == "" && s != "" || strings.ContainsAny(a, " \t\"\\") {
				t.Errorf("script %q: argument %q would be quoted", s, a)
			}
		}
	}
}

func TestArgvTooLong(t *testing.T) {
	// "pwsh" and the flags: 5+8+11+16+16 = 56, the NUL 1; each 3 ASCII
	// characters of script are 8 of base64.
	fixed := len("pwsh -NoLogo -NoProfile -NonInteractive -EncodedCommand ") + 1
	most := (MaxCommandLine - fixed) / 8 * 3
	argv, err := Argv("pwsh", strings.Repeat("a", most))
	if err != nil {
		t.Fatalf("a script of %d characters: %v", most, err)
	}
	if n := len(strings.Join(argv, " ")) + 1; n > MaxCommandLine {
		t.Fatalf("accepted a command line of %d", n)
	}
	_, err = Argv("pwsh", strings.Repeat("a", most+3))
	if err == nil || !strings.Contains(err.Error(), "too long for a Windows command line") {
		t.Errorf("a script of %d characters: err = %v, want too long", most+3, err)
	}
}

func TestCommandLineBound(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want int // the command line Windows would get, with its NUL
	}{
		{[]string{"pwsh"}, len("pwsh") + 1},
		{[]string{"pwsh", "-c"}, len("pwsh -c") + 1},
		{[]string{`C:\Program Files\pwsh.exe`}, len(`"C:\Program Files\pwsh.exe"`) + 1},
		{[]string{"a", ""}, len(`a ""`) + 1},
		{[]string{`a\"b`}, len(`a\\\"b`) + 1},
		{[]string{"日本"}, 2 + 1},
	} {
		if got := commandLineBound(tc.argv); got < tc.want {
			t.Errorf("commandLineBound(%q) = %d, below the command line's %d", tc.argv, got, tc.want)
		}
	}
}
