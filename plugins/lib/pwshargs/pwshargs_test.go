package pwshargs

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/dshrun/dsh/internal/golden"
)

// decode is what PowerShell runs of an -EncodedCommand argument.
func decode(t *testing.T, enc string) string {
	t.Helper()
	s, err := DecodeCommand(enc)
	if err != nil {
		t.Fatalf("%q: %v", enc, err)
	}
	return s
}

// The encoding of PowerShell's own documentation (about_Pwsh, the
// -EncodedCommand example), and texts beyond the ASCII range and the
// basic plane come back as they went.
func TestEncodeCommand(t *testing.T) {
	if got := EncodeCommand(`dir "c:\program files" `); got != "ZABpAHIAIAAiAGMAOgBcAHAAcgBvAGcAcgBhAG0AIABmAGkAbABlAHMAIgAgAA==" {
		t.Fatalf("the documentation's example: %s", got)
	}
	var lines []string
	for _, s := range []string{"", "echo hi", "Write-Output 'héllo wörld'", "\"😀\" + ‘x’", "a\r\nb\tc\x00d"} {
		enc := EncodeCommand(s)
		if got := decode(t, enc); got != s {
			t.Fatalf("%q came back as %q", s, got)
		}
		lines = append(lines, fmt.Sprintf("%q\n%s", s, enc))
	}
	golden.Check(t, "encode", strings.Join(lines, "\n")+"\n")
}

// unquote reads a single-quoted literal as PowerShell does: a quote
// character twice is one, a quote character once ends it.
func unquote(t *testing.T, lit string) (value, rest string) {
	t.Helper()
	rs := []rune(lit)
	if len(rs) == 0 || !isQuote(rs[0]) {
		t.Fatalf("not a single-quoted literal: %.40q", lit)
	}
	var b strings.Builder
	for i := 1; i < len(rs); i++ {
		if !isQuote(rs[i]) {
			b.WriteRune(rs[i])
			continue
		}
		if i+1 < len(rs) && isQuote(rs[i+1]) {
			b.WriteRune(rs[i])
			i++
			continue
		}
		return b.String(), string(rs[i+1:])
	}
	t.Fatalf("unterminated literal: %.40q", lit)
	return "", ""
}

// Every quote character PowerShell reads as one is doubled, so any text
// comes back whole; nothing else changes.
func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "''"},
		{"plain $x `n", "'plain $x `n'"},
		{"it's", "'it''s'"},
		{"‘a’ ‚b‛", "'‘‘a’’ ‚‚b‛‛'"},
		{"\"double\"", "'\"double\"'"},
	} {
		got := Quote(c.in)
		if got != c.want {
			t.Errorf("Quote(%q) = %q, want %q", c.in, got, c.want)
		}
		if v, rest := unquote(t, got); v != c.in || rest != "" {
			t.Errorf("%q read back as %q, %q left", got, v, rest)
		}
	}
}

// The scripts as PowerShell gets them: the prelude, the command and its
// status in one Invoke-Expression within a try that restores the console,
// the epilogue.
func TestScripts(t *testing.T) {
	golden.Check(t, "script", Script("Get-ChildItem | Select-Object Name\nnative-tool --flag 'it''s' ‘x’\nexit 3"))
	golden.Check(t, "script-fd", ScriptFromFD(3))
	golden.Check(t, "script-file", ScriptFromFile(`C:\Users\o'brien\AppData\Local\Temp\dsh-pwsh-1.ps1`))
}

// The command's text reaches Invoke-Expression whole, followed by its
// status statement on a line of its own, however it is quoted or ends.
func TestScriptCarriesTheCommandWhole(t *testing.T) {
	const head = "try{Invoke-Expression ("
	for _, cmd := range []string{"echo hi", "'", "’'‘", "echo a `", "# only a comment", "@'\nhere\n'@", strings.Repeat("x'", 2000)} {
		s := Script(cmd)
		if !strings.HasPrefix(s, Prelude) || !strings.HasSuffix(s, Epilogue) {
			t.Fatalf("%q: not prelude ... epilogue:\n%s", cmd, s)
		}
		body := strings.TrimSuffix(strings.TrimPrefix(s, Prelude), Epilogue)
		if !strings.HasPrefix(body, head) {
			t.Fatalf("%q: %q", cmd, body)
		}
		got, rest := unquote(t, body[len(head):])
		if got != cmd {
			t.Fatalf("the command came through as %q, want %q", got, cmd)
		}
		st, rest := unquote(t, strings.TrimPrefix(rest, "+\"`n\"+"))
		if st != status || rest != ")|Out-Default;$__dshRan=$?}finally{"+restore+"}\n" {
			t.Fatalf("%q: status %q, then %q", cmd, st, rest)
		}
	}
}

// The longest command that goes inline, made of quotes that all double,
// with a long program path, stays under Windows' command-line limit of
// 32,767 UTF-16 units (the command line joins the arguments with spaces).
func TestMaxInlineFitsWindowsCommandLine(t *testing.T) {
	program := `C:\` + strings.Repeat(`x\`, 1000) + `pwsh.exe`
	for _, cmd := range []string{strings.Repeat("'", MaxInline), strings.Repeat("’", MaxInline/3), strings.Repeat("😀", MaxInline/4)} {
		line := strings.Join(Argv(program, Script(cmd)), " ")
		if n := len(utf16.Encode([]rune(line))); n > 32767 {
			t.Fatalf("a command of %d bytes makes a command line of %d units", len(cmd), n)
		}
	}
	argv := Argv("pwsh", "x")
	if len(argv) != 8 || strings.Join(argv[:7], " ") != "pwsh -NoLogo -NoProfile -NonInteractive -OutputFormat Text -EncodedCommand" || decode(t, argv[7]) != "x" {
		t.Fatalf("argv %q", argv)
	}
}
