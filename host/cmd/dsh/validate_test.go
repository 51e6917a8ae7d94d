package main

import (
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
