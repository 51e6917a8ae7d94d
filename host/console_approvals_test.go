//go:build unix

package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/internal/testplugins"
)

var (
	pretendOnce sync.Once
	pretendBin  string
	pretendErr  error
)

// bashPretend builds dsh-bash-pretend (an executor that reports
// workspace-write, so tool-bash asks before an escalated run) once.
func bashPretend(t *testing.T) string {
	t.Helper()
	pretendOnce.Do(func() {
		pretendBin = filepath.Join(binDir, "dsh-bash-pretend")
		cmd := exec.Command("go", "build", "-o", pretendBin, "./internal/testplugins/bashpretend")
		cmd.Dir = testplugins.Root()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			pretendErr = errors.New(string(out))
		}
	})
	if pretendErr != nil {
		t.Fatal(pretendErr)
	}
	return pretendBin
}

const consoleApprovalYAML = `
sandbox:
  defaultMode: workspace-write
  workspaceRoot: .
approval:
  askTimeout: 30s
  channels: [client, console]
  otherwise: ask
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-pretend
  - id: tools
    name: tool-bash
`

// cannotElicit is a client that cannot ask its user, as an MCP client
// without elicitation.
type cannotElicit struct{}

func (cannotElicit) Ask(context.Context, string, *approval.Request) (*approval.Decision, error) {
	return nil, errors.New("the MCP client does not support elicitation")
}

// An escalated run through the real host and plugins: its question waits
// at the console with what the model asked; the console's answer decides
// whether the command runs, and the question leaves the desk.
func TestConsoleApprovalThroughHost(t *testing.T) {
	bashPretend(t)
	h := startHost(t, writeComp(t, consoleApprovalYAML))
	changes, stop := h.QuestionChanges()
	defer stop()
	for _, approve := range []bool{true, false} {
		marker := filepath.Join(t.TempDir(), "ran")
		args, _ := json.Marshal(bashCall("echo run >> "+marker+"; echo ran", "sandbox_permissions", "danger-full-access", "justification", "it writes outside the workspace"))
		type done struct {
			res *ToolResult
			err error
		}
		out := make(chan done, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := h.CallTool(ctx, ToolCall{Owner: "agent", Tool: "bash", Arguments: args, Asker: cannotElicit{}})
			out <- done{res, err}
		}()
		var q Question
		for deadline := time.After(30 * time.Second); q.ID == ""; {
			select {
			case <-changes:
			case <-deadline:
				t.Fatal("no question at the console")
			}
			if qs := h.Questions(); len(qs) == 1 {
				q = qs[0]
			}
		}
		if q.Owner != "agent" || q.Kind != approval.KindSandboxEscalation || !strings.Contains(q.Command, "echo ran") || q.Justification != "it writes outside the workspace" {
			t.Fatalf("question %+v", q)
		}
		if err := h.AnswerQuestion(q.ID, approve); err != nil {
			t.Fatal(err)
		}
		var d done
		select {
		case d = <-out:
		case <-time.After(60 * time.Second):
			t.Fatal("the call did not end")
		}
		if d.err != nil {
			t.Fatal(d.err)
		}
		b, _ := os.ReadFile(marker)
		ran := strings.Count(string(b), "run\n")
		if approve && (ran != 1 || d.res.IsError || !strings.Contains(d.res.Text, "ran")) {
			t.Fatalf("approved: ran %d times: %q", ran, d.res.Text)
		}
		if !approve && (ran != 0 || !d.res.IsError || !strings.Contains(d.res.Text, "denied by the user at the console; nothing was run")) {
			t.Fatalf("denied: ran %d times: %q", ran, d.res.Text)
		}
		if qs := h.Questions(); len(qs) != 0 {
			t.Fatalf("answered question still waiting: %+v", qs)
		}
		if err := h.AnswerQuestion(q.ID, true); !errors.Is(err, ErrNoQuestion) {
			t.Fatalf("answered twice: %v", err)
		}
	}
}
