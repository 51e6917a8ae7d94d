package shelltool

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/plugins/shell"
)

type approverFunc func(context.Context, *approval.Request) (*approval.Decision, error)

func (f approverFunc) Approve(ctx context.Context, r *approval.Request) (*approval.Decision, error) {
	return f(ctx, r)
}

// An escalation is asked of ctx.approval before anything runs, and every
// way of not getting a yes is a refusal that says why.
func TestEscalate(t *testing.T) {
	var asked []*approval.Request
	allow := approverFunc(func(_ context.Context, r *approval.Request) (*approval.Decision, error) {
		asked = append(asked, r)
		return &approval.Decision{Approved: true, Reason: "allowed by approval rule 1", DecidedBy: approval.ByPolicy}, nil
	})
	deny := approverFunc(func(context.Context, *approval.Request) (*approval.Decision, error) {
		return &approval.Decision{Reason: "denied by approval rule 2 (c.yaml:9)", DecidedBy: approval.ByPolicy}, nil
	})
	broken := approverFunc(func(context.Context, *approval.Request) (*approval.Decision, error) {
		return nil, errors.New("the host is shutting down")
	})
	tb := func(a approval.Approver) *Tool {
		return &Tool{def: testShell, log: hclog.NewNullLogger(), sh: shell.NewClient(nil, shell.WorkspaceWrite), approver: a}
	}
	ctx := context.Background()
	esc := runArgs{Command: "npm install", SandboxPermissions: "danger-full-access", Justification: "needs the registry"}

	if pol, res := tb(allow).escalate(ctx, runArgs{Command: "ls"}); pol != nil || res != nil || len(asked) != 0 {
		t.Fatalf("no escalation asked: %v %v %v", pol, res, asked)
	}
	if pol, res := tb(allow).escalate(ctx, runArgs{Command: "ls", SandboxPermissions: "workspace-write"}); pol != nil || res != nil || len(asked) != 0 {
		t.Fatalf("the executor's own mode is no escalation: %v %v", pol, res)
	}
	pol, res := tb(allow).escalate(ctx, esc)
	if res != nil || pol.GetMode() != "danger-full-access" || len(asked) != 1 || asked[0].Tool != "sh" || asked[0].Command != "npm install" || asked[0].Reason != "needs the registry" || asked[0].Kind != approval.KindSandboxEscalation {
		t.Fatalf("approved: %v %v %v", pol, res, asked)
	}
	for _, c := range []struct {
		name string
		a    approval.Approver
		args runArgs
		want string
	}{
		{"no justification", allow, runArgs{Command: "npm install", SandboxPermissions: "danger-full-access"}, "needs a justification"},
		{"denied", deny, esc, "[sandbox escalation to danger-full-access was denied by approval rule 2 (c.yaml:9); nothing was run]"},
		{"an error", broken, esc, "was denied: the approval could not be asked: the host is shutting down; nothing was run"},
		{"no approver", nil, esc, "was denied: this composition has no approval provider"},
		{"less access", allow, runArgs{Command: "ls", SandboxPermissions: "read-only", Justification: "x"}, `sandbox_permissions read-only gives no more access than the sandbox's "workspace-write" mode; nothing was run`},
	} {
		pol, res := tb(c.a).escalate(ctx, c.args)
		if pol != nil || res == nil || !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s: %v %+v, want a refusal saying %q", c.name, pol, res, c.want)
		}
	}
}
