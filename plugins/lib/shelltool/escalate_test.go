package shelltool

import (
	"context"
	"errors"
	"slices"
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

// Hosts beyond the network rules are asked of ctx.approval as their own
// question, naming them, before anything runs; the approved ones go to the
// executor on this run's policy alone. A mode asked for too is a question
// of its own, asked first; danger-full-access, or a sandbox that gives the
// whole network, makes the hosts moot.
func TestEscalateNetwork(t *testing.T) {
	var asked []*approval.Request
	answer := func(approve func(*approval.Request) bool) approval.Approver {
		return approverFunc(func(_ context.Context, r *approval.Request) (*approval.Decision, error) {
			asked = append(asked, r)
			if approve(r) {
				return &approval.Decision{Approved: true, Reason: "approved by the user", DecidedBy: approval.ByUser}, nil
			}
			return &approval.Decision{Reason: "denied by the user (declined)", DecidedBy: approval.ByUser}, nil
		})
	}
	all := answer(func(*approval.Request) bool { return true })
	modeOnly := answer(func(r *approval.Request) bool { return r.Kind == approval.KindSandboxEscalation })
	tb := func(a approval.Approver, mode shell.SandboxMode) *Tool {
		return &Tool{def: testShell, log: hclog.NewNullLogger(), sh: shell.NewClient(nil, mode), approver: a}
	}
	ctx := context.Background()
	npm := runArgs{Command: "npm install", NetworkHosts: []string{"registry.npmjs.org", "registry.npmjs.org", "cdn.test:8443"}, Justification: "installs the dependencies"}

	pol, res := tb(all, shell.WorkspaceWrite).escalate(ctx, npm)
	if res != nil || pol.GetMode() != "" || !slices.Equal(pol.GetNetworkAllow(), []string{"registry.npmjs.org", "cdn.test:8443"}) {
		t.Fatalf("approved: %v %v", pol, res)
	}
	if len(asked) != 1 || asked[0].Kind != approval.KindNetworkEscalation || !slices.Equal(asked[0].Hosts, []string{"registry.npmjs.org", "cdn.test:8443"}) ||
		asked[0].Command != "npm install" || asked[0].Tool != "sh" || asked[0].Reason != "installs the dependencies" || asked[0].TargetMode != "" {
		t.Fatalf("asked: %v", asked)
	}

	// Both: two questions, the mode's first; a no to the hosts runs nothing.
	asked = nil
	both := runArgs{Command: "make deps", SandboxPermissions: "workspace-write", NetworkHosts: []string{"proxy.golang.org"}, Justification: "fetches modules"}
	pol, res = tb(all, shell.ReadOnly).escalate(ctx, both)
	if res != nil || pol.GetMode() != "workspace-write" || !slices.Equal(pol.GetNetworkAllow(), []string{"proxy.golang.org"}) || len(asked) != 2 ||
		asked[0].Kind != approval.KindSandboxEscalation || len(asked[0].Hosts) != 0 || asked[1].Kind != approval.KindNetworkEscalation {
		t.Fatalf("both approved: %v %v %v", pol, res, asked)
	}
	asked = nil
	pol, res = tb(modeOnly, shell.ReadOnly).escalate(ctx, both)
	if pol != nil || res == nil || !res.IsError || res.Text != "[network access to proxy.golang.org was denied by the user (declined); nothing was run]" || len(asked) != 2 {
		t.Fatalf("the hosts refused: %v %+v", pol, res)
	}

	// Moot: danger-full-access asked for and approved, or the whole
	// network already; not asked.
	asked = nil
	full := runArgs{Command: "curl x.test", SandboxPermissions: "danger-full-access", NetworkHosts: []string{"x.test"}, Justification: "j"}
	if pol, res := tb(all, shell.WorkspaceWrite).escalate(ctx, full); res != nil || pol.GetMode() != "danger-full-access" || len(pol.GetNetworkAllow()) != 0 || len(asked) != 1 {
		t.Fatalf("danger-full-access: %v %v %v", pol, res, asked)
	}
	asked = nil
	open := tb(all, shell.WorkspaceWrite)
	open.network = true
	if pol, res := open.escalate(ctx, npm); res != nil || pol != nil || len(asked) != 0 {
		t.Fatalf("the whole network: %v %v %v", pol, res, asked)
	}

	for _, c := range []struct {
		name string
		a    approval.Approver
		args runArgs
		want string
	}{
		{"no justification", all, runArgs{Command: "curl x.test", NetworkHosts: []string{"x.test"}}, "[network access to x.test needs a justification: say why the command needs to reach it; nothing was run]"},
		{"not a host", all, runArgs{Command: "curl x.test", NetworkHosts: []string{"https://x.test/"}, Justification: "j"}, `[network_hosts: "https://x.test/" is not a host: write a host name (example.com) or an IP address, optionally with :port; nothing was run]`},
		{"a wildcard", all, runArgs{Command: "curl x.test", NetworkHosts: []string{"*.x.test"}, Justification: "j"}, `[network_hosts: "*.x.test" is not a host`},
		{"an error", broken(), npm, "[network access to registry.npmjs.org, cdn.test:8443 was denied: the approval could not be asked: the host is shutting down; nothing was run]"},
		{"no approver", nil, npm, "was denied: this composition has no approval provider"},
	} {
		asked = nil
		pol, res := tb(c.a, shell.WorkspaceWrite).escalate(ctx, c.args)
		if pol != nil || res == nil || !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s: %v %+v, want a refusal saying %q", c.name, pol, res, c.want)
		}
		if c.name != "an error" && c.name != "no approver" && len(asked) != 0 {
			t.Errorf("%s: asked %v", c.name, asked)
		}
	}
}

func broken() approval.Approver {
	return approverFunc(func(context.Context, *approval.Request) (*approval.Decision, error) {
		return nil, errors.New("the host is shutting down")
	})
}
