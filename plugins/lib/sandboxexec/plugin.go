package sandboxexec

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/sdk"
)

// NewPlugin is a ctx.shell plugin that runs its commands with l, each
// confined through ctx.sandbox under the composition's policy
// (ctx.sandboxPolicy), and starting in the policy's workspace unless its
// config names a cwd. It reports the policy's mode.
func NewPlugin(name, version, summary string, l *localexec.Executor) *localexec.Plugin {
	e := New(l, nil, nil)
	return &localexec.Plugin{
		Name: name, Version: version, Summary: summary,
		Exec:   l,
		Serve:  e,
		Inject: []sdk.Inject{{Key: sandbox.Key}, {Key: sandbox.PolicyKey}},
		Setup: func(ctx context.Context, host *sdk.Host, raw json.RawMessage, cfg *localexec.Config) error {
			policy, err := sandbox.NewClient(host.Conn(sandbox.PolicyKey)).Get(ctx)
			if err != nil {
				return fmt.Errorf("%s needs the composition's sandbox policy: %w", name, err)
			}
			if !namesCwd(raw) && policy.WorkspaceRoot != "" {
				// Commands start in the workspace, the folder they may
				// write in, unless the config names another.
				cfg.Cwd = policy.WorkspaceRoot
			}
			e.Policy = policy
			e.Sandbox = sandbox.NewRunnerClient(host.Conn(sandbox.Key))
			return nil
		},
		Mode: e.Mode,
	}
}

// namesCwd reports whether the config (the shell settings with the
// entry's over them) names a working directory.
func namesCwd(raw json.RawMessage) bool {
	var c struct {
		Cwd string `json:"cwd"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Cwd != ""
}
