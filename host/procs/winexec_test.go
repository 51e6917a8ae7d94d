package procs

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

// How Windows finds a program and hands it its environment, tested on
// every system.

func TestEnvName(t *testing.T) {
	for kv, want := range map[string]string{
		"A=b":          "A",
		"A==b":         "A",
		"Path=C:\\x;D": "Path",
		"=C:=C:\\dir":  "=C:", // a drive's working directory
		"=":            "=",
		"=ExitCode=0":  "=ExitCode",
		"NOVALUE":      "NOVALUE",
		"":             "",
	} {
		if got := envName(kv); got != want {
			t.Errorf("envName(%q) = %q, want %q", kv, got, want)
		}
	}
}

func TestFoldEnv(t *testing.T) {
	ambient := []string{"=C:=C:\\w", "Path=C:\\Windows", "TEMP=C:\\t", "windir=C:\\Windows"}
	got := foldEnv(ambient, map[string]string{"PATH": "D:\\bin", "temp": "E:\\t", "NEW": "1"})
	want := []string{"=C:=C:\\w", "windir=C:\\Windows", "NEW=1", "PATH=D:\\bin", "temp=E:\\t"}
	if !slices.Equal(got, want) {
		t.Errorf("foldEnv = %q, want %q", got, want)
	}
	if got := foldEnv(ambient, nil); !slices.Equal(got, ambient) {
		t.Errorf("no explicit layer: %q, want the ambient %q", got, ambient)
	}
}

func TestFoldedValue(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		name string
		want string
	}{
		{[]string{"Path=a", "PATH=b"}, "PATH", "b"},
		{[]string{"PATH=b", "path=c"}, "PATH", "c"},
		{[]string{"PATHEXT=.EXE"}, "PATH", ""},
		{[]string{"PATHEXT=.EXE"}, "PATHEXT", ".EXE"},
		{[]string{"PATH="}, "PATH", ""},
		{[]string{"PATH"}, "PATH", ""},
		{nil, "PATH", ""},
	} {
		if got := foldedValue(tc.env, tc.name); got != tc.want {
			t.Errorf("foldedValue(%q, %q) = %q, want %q", tc.env, tc.name, got, tc.want)
		}
	}
}

func TestLastFold(t *testing.T) {
	got := lastFold([]string{"A=1", "a=2", "B=3", "=C:=x", "A=4", "=c:=y"})
	want := []string{"B=3", "A=4", "=c:=y"}
	if !slices.Equal(got, want) {
		t.Errorf("lastFold = %q, want %q", got, want)
	}
}

// block reads an environment block back as its strings, and checks it
// ends as CreateProcess wants: a NUL after each string and one more.
func block(t *testing.T, b []uint16) []string {
	t.Helper()
	if len(b) < 2 || b[len(b)-1] != 0 || b[len(b)-2] != 0 {
		t.Fatalf("block %v does not end in two NULs", b)
	}
	s := string(utf16.Decode(b[:len(b)-1]))
	if s == "\x00" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\x00"), "\x00")
}

func TestEnvBlock(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        []string
		systemRoot string
		want       []string
	}{
		{"empty", nil, "", nil},
		{"empty, root added", nil, `C:\Windows`, []string{`SYSTEMROOT=C:\Windows`}},
		{"one", []string{"A=1"}, "", []string{"A=1"}},
		{"root kept, in any case", []string{`SystemRoot=D:\W`}, `C:\Windows`, []string{`SystemRoot=D:\W`}},
		{"duplicates, last wins", []string{"A=1", "a=2"}, "", []string{"a=2"}},
		{"empty strings skipped", []string{"", "A=1", ""}, "", []string{"A=1"}},
		{"drive directories kept", []string{"=C:=C:\\w", "A=1"}, "", []string{"=C:=C:\\w", "A=1"}},
		{"unicode", []string{"É=ü", "X=😀"}, "", []string{"É=ü", "X=😀"}},
		{"empty value", []string{"A="}, "", []string{"A="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := envBlock(tc.env, tc.systemRoot)
			if err != nil {
				t.Fatal(err)
			}
			if got := block(t, b); !slices.Equal(got, tc.want) {
				t.Errorf("block holds %q, want %q", got, tc.want)
			}
		})
	}
	// Golden: the bytes, a surrogate pair included.
	b, err := envBlock([]string{"A=😀"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint16{'A', '=', 0xD83D, 0xDE00, 0, 0}; !slices.Equal(b, want) {
		t.Errorf("block = %#x, want %#x", b, want)
	}
	if b, _ := envBlock(nil, ""); !slices.Equal(b, []uint16{0, 0}) {
		t.Errorf("empty block = %v, want two NULs", b)
	}
	if _, err := envBlock([]string{"A=1\x00B=2"}, ""); err == nil {
		t.Error("a NUL inside a variable would smuggle another one in; want an error")
	}
}

func TestPathExts(t *testing.T) {
	for pathext, want := range map[string][]string{
		"":                         {".com", ".exe", ".bat", ".cmd"},
		".EXE;.Bat":                {".exe", ".bat"},
		"exe;;.CMD;":               {".exe", ".cmd"},
		".COM;.EXE;.BAT;.CMD;.PS1": {".com", ".exe", ".bat", ".cmd", ".ps1"},
	} {
		if got := pathExts(pathext); !slices.Equal(got, want) {
			t.Errorf("pathExts(%q) = %q, want %q", pathext, got, want)
		}
	}
}

func TestProgramNames(t *testing.T) {
	for _, tc := range []struct {
		name, pathext string
		want          []string
	}{
		{"pwsh", "", []string{"pwsh.com", "pwsh.exe", "pwsh.bat", "pwsh.cmd"}},
		{"pwsh", ".EXE", []string{"pwsh.exe"}},
		// With an extension, itself first, then "foo.bat.exe" and the
		// like.
		{"pwsh.exe", ".EXE;.CMD", []string{"pwsh.exe", "pwsh.exe.exe", "pwsh.exe.cmd"}},
		{"script.ps1", ".EXE", []string{"script.ps1", "script.ps1.exe"}},
		{"v1.2/tool", ".EXE", []string{"v1.2/tool.exe"}}, // the dot is a directory's
		{".hidden", ".EXE", []string{".hidden", ".hidden.exe"}},
	} {
		if got := programNames(tc.name, tc.pathext); !slices.Equal(got, tc.want) {
			t.Errorf("programNames(%q, %q) = %q, want %q", tc.name, tc.pathext, got, tc.want)
		}
	}
}

func TestHasDir(t *testing.T) {
	for _, tc := range []struct {
		name           string
		unix, windowsy bool
	}{
		{"bash", false, false},
		{"./run", true, true},
		{"/bin/sh", true, true},
		{`bin\tool.exe`, false, true},
		{`C:tool.exe`, false, true},
		{`C:\Program Files\PowerShell\7\pwsh.exe`, false, true},
		{"pwsh.exe", false, false},
	} {
		want := tc.unix
		if onWindows {
			want = tc.windowsy
		}
		if got := hasDir(tc.name); got != want {
			t.Errorf("hasDir(%q) = %v, want %v", tc.name, got, want)
		}
	}
}
