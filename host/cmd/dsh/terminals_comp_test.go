package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/internal/testplugins"
)

// The terminals composition serves as it is: a terminal opens, a line
// settles at the shell's prompt.
func TestTerminalsComposition(t *testing.T) {
	f := filepath.Join(testplugins.Root(), "compositions", "terminals.yaml")
	out, errOut, code := dsh(t, nil, "call", f, "terminal_list", `{}`)
	if code != 0 || strings.TrimSpace(out) != "[no terminals open]" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	out, errOut, code = dsh(t, nil, "call", f, "terminal_open", `{"cols":80,"rows":24}`)
	if code != 0 || !strings.Contains(out, "open: bash in ") || !strings.Contains(out, "80×24") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
}
