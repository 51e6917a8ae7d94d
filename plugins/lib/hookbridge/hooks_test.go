package hookbridge

import "testing"

// Matchers as both agents read them: names exactly, '|' between them,
// anything else a regex that matches anywhere, empty or * everything.
func TestCompileMatcher(t *testing.T) {
	for _, c := range []struct {
		m    string
		yes  []string
		no   []string
		full string
	}{
		{"Bash", []string{"Bash"}, []string{"BashOutput", "bash", "mcp__dsh__bash"}, "Bash"},
		{"Edit|Write", []string{"Edit", "Write"}, []string{"Edit|Write", "Writer"}, "Edit|Write"},
		{"mcp__dsh__.*", []string{"mcp__dsh__job_output"}, []string{"Bash"}, ".*(?:mcp__dsh__.*).*"},
		{"B.sh", []string{"Bash", "xBashx"}, []string{"Bsh"}, ".*(?:B.sh).*"},
		{"", []string{"Bash", "anything"}, nil, "*"},
		{"*", []string{"Bash"}, nil, "*"},
	} {
		match, full, err := CompileMatcher(c.m)
		if err != nil || full != c.full {
			t.Fatalf("%q: %q %v", c.m, full, err)
		}
		for _, n := range c.yes {
			if !match(n) {
				t.Errorf("%q does not take %q", c.m, n)
			}
		}
		for _, n := range c.no {
			if match(n) {
				t.Errorf("%q takes %q", c.m, n)
			}
		}
	}
	if _, _, err := CompileMatcher("(?=x)"); err == nil {
		t.Error("a lookahead compiled")
	}
}

// Values are found at their lines, in nested objects and arrays.
func TestLocate(t *testing.T) {
	raw := []byte(`{
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {"type": "command", "command": "a"},
          {"type": "command",
           "command": "b", "timeout": 3}
        ]
      },
      {"matcher": "x", "hooks": []}
    ],
    "PostToolUse": []
  }
}`)
	l := Locate("f.json", raw)
	for path, want := range map[string]string{
		"hooks/PreToolUse/0/matcher":         "f.json:5",
		"hooks/PreToolUse/0/hooks/0":         "f.json:7",
		"hooks/PreToolUse/0/hooks/1":         "f.json:8",
		"hooks/PreToolUse/0/hooks/1/timeout": "f.json:9",
		"hooks/PreToolUse/1/matcher":         "f.json:12",
		"hooks/PostToolUse":                  "f.json:14",
		"hooks/PreToolUse/2":                 "f.json",
	} {
		if got := l.At(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
}
