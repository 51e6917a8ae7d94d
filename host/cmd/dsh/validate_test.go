package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/internal/testplugins"
)

// dsh validate counts the problems it lists, lists each as one indented
// entry, and places each at the value at fault: file:line:column.
func TestValidateProblems(t *testing.T) {
	cases := []struct {
		file string
		want []string
	}{
		{"config.yaml", []string{
			`dsh validate: testdata/validate/config.yaml: 4 problems:`,
			`  testdata/validate/config.yaml:5:16: plugin "bash": settings.shell /timeoutMs: got string, want integer`,
			`  testdata/validate/config.yaml:14:13: plugin "probe": config /fact: got number, want string`,
			`  testdata/validate/config.yaml:15:18: plugin "probe": config /failApply: got string, want boolean`,
			`  testdata/validate/config.yaml:16:7: plugin "probe": config: unknown key "extra" (allowed: fact, failApply, provideKey, slowApplyIf, slowApplyMs)`,
		}},
		{"file.yaml", []string{
			`dsh validate: testdata/validate/file.yaml: 3 problems:`,
			`  testdata/validate/file.yaml:3:17: bad duration for startTimeout: got the string "soon", want a positive Go duration such as "10s" or "1m30s"`,
			`  testdata/validate/file.yaml:4:3: unknown host key "stopTimout" (allowed: startTimeout, stopTimeout, callTimeout, pingInterval, pingTimeout, restartWait, scrub, spill)`,
			`  testdata/validate/file.yaml:8:15: plugin "env": disabled must be true or false, got the string "maybe"`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			out, errOut, code := dsh(t, nil, "validate", filepath.Join("testdata", "validate", tc.file))
			if code != 2 || out != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, out)
			}
			if want := strings.Join(tc.want, "\n") + "\n"; errOut != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
			}
		})
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("validate left processes: %v", left)
	}
}

// What a plugin reads at apply, validate reads too: a hook bridge's
// malformed settings file fails validate with the very message serve
// gives, naming the file and line; a good one passes.
func TestValidateReadsWhatServeReads(t *testing.T) {
	cases := []struct {
		comp, file, bad, good, want string
	}{
		{
			comp: "claude-hooks.yaml", file: ".claude/settings.json",
			bad:  "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"Bash\",, \"hooks\": []}\n    ]\n  }\n}\n",
			good: `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}`,
			want: `testdata/validate/claude-hooks.yaml:5:5: plugin "claude-hooks" (BIN/dsh-hooks-claude-code): apply: read hooks: PROJECT/.claude/settings.json:4: not valid JSON: invalid character ',' looking for beginning of object key string`,
		},
		{
			comp: "codex-hooks.yaml", file: ".codex/config.toml",
			bad:  "model = \"m\"\n\n[hooks]\nPreToolUse = [ { matcher = \"Bash\" hooks = [] } ]\n",
			good: "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"true\"\n",
			want: `testdata/validate/codex-hooks.yaml:5:5: plugin "codex-hooks" (BIN/dsh-hooks-codex): apply: read hooks: PROJECT/.codex/config.toml:4: not valid TOML`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.comp, func(t *testing.T) {
			project := t.TempDir()
			env := []string{"DSH_PROJECT=" + project, "HOME=" + t.TempDir(), "CODEX_HOME="}
			file := filepath.Join(project, tc.file)
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(tc.bad), 0o600); err != nil {
				t.Fatal(err)
			}
			comp := filepath.Join("testdata", "validate", tc.comp)
			want := strings.NewReplacer("BIN", binDir, "PROJECT", project).Replace(tc.want)
			said := map[string]string{}
			for _, cmd := range []string{"validate", "serve"} {
				_, errOut, code := dsh(t, env, cmd, comp)
				said[cmd] = lineAfter(errOut, "dsh "+cmd+": ")
				if code != 2 || !strings.HasPrefix(said[cmd], want) {
					t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 2 and a line starting %q", cmd, code, errOut, want)
				}
			}
			if said["validate"] != said["serve"] {
				t.Errorf("validate and serve differ:\nvalidate: %s\nserve:    %s", said["validate"], said["serve"])
			}
			if err := os.WriteFile(file, []byte(tc.good), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, errOut, code := dsh(t, env, "validate", comp); code != 0 {
				t.Errorf("a good %s: exit %d, stderr:\n%s", tc.file, code, errOut)
			}
		})
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("left processes: %v", left)
	}
}

// lineAfter is the rest of the first line of s that starts with prefix.
func lineAfter(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest
		}
	}
	return ""
}
