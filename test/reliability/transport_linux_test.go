//go:build linux

package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testneeds"
)

// Both runners of bash-sandbox read a command longer than one argument.
func TestSandboxLongCommand(t *testing.T) {
	for _, runner := range []string{"landlock", "bubblewrap"} {
		t.Run(runner, func(t *testing.T) {
			if runner == "bubblewrap" {
				testneeds.Command(t, "bwrap")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			ws := t.TempDir()
			s := startServe(t, ctx, sandboxComp(ws, "workspace-write", "  runner: "+runner+"\n"))
			f := fault(t, "sandbox ("+runner+"): a command of 200 KiB")
			cmd, want := longCommand(200 << 10)
			text, facts := s.tool(t, ctx, "bash", map[string]any{"command": "echo inside > made\ncat made\n" + cmd, "workdir": ws})
			sb, _ := facts["sandbox"].(map[string]any)
			if !strings.Contains(text, "inside\n"+want) || strings.Contains(text, "not-reached") || !strings.HasPrefix(fmt.Sprint(sb["enforcement"]), runner) {
				t.Fatalf("%.2000q (sandbox %v)", text, sb)
			}
			f.Saw("ran confined: %v", sb["enforcement"])
		})
	}
}
