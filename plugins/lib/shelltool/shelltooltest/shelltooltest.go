// Package shelltooltest checks what a shell tool built on shelltool tells
// the model about itself.
package shelltooltest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/plugins/lib/shelltool"
	"github.com/dshrun/dsh/plugins/shell"
)

// CheckSpecs checks s's tools against the golden files tools-local,
// tools-sandboxed and tools-read-only in the caller's testdata: under an
// executor that does not sandbox, one whose policy names more folders than
// the workspace, and a read-only one started below its workspace. The
// description must say the output budget in at most maxChars characters.
func CheckSpecs(t *testing.T, s shelltool.Shell, maxChars int) {
	t.Helper()
	places := map[string]shelltool.Place{
		"local":     {Start: "/home/me/project"},
		"sandboxed": {Start: "/home/me/project", Workspace: "/home/me/project", More: []string{"/home/me/shared-lib", "/home/me/.npm"}},
		"read-only": {Start: "/home/me/project/sub", Workspace: "/home/me/project"},
	}
	for name, mode := range map[string]shell.SandboxMode{"local": "", "sandboxed": shell.WorkspaceWrite, "read-only": shell.ReadOnly} {
		var b strings.Builder
		for _, spec := range s.Specs(mode, places[name], 120000, 600000, shelltool.DefaultMaxOutputChars) {
			b.WriteString("## " + spec.Name + " — " + spec.Title + "\n" + spec.Description + "\n\nschema: " + spec.InputSchema + "\n\n")
		}
		golden.Check(t, "tools-"+name, b.String())
	}
	// The description teaches the budget in few words.
	if d := s.Specs("", places["local"], 120000, 600000, shelltool.DefaultMaxOutputChars)[0].Description; utf8.RuneCountInString(d) > maxChars || !strings.Contains(d, "30,000 characters") {
		t.Errorf("the %s description is %d characters (at most %d) and must say the budget:\n%s", s.Tool, utf8.RuneCountInString(d), maxChars, d)
	}
}
