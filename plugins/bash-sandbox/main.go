// Command dsh-bash-sandbox is the confining POSIX executor: it provides
// ctx.shell by running each command as a fresh `bash -c` process, like
// bash-local, confined through ctx.sandbox under the composition's policy
// (ctx.sandboxPolicy), starting in the policy's workspace unless its config
// names a cwd. Its results carry the sandbox facts: the mode, the
// runner, and the denials its errors show.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/lib/sandboxexec"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
	"github.com/dshrun/dsh/sdk"
)

type bashSandbox struct {
	exec *sandboxexec.Executor
}

func (p *bashSandbox) Describe() sdk.Description {
	return sdk.Description{
		Name:              "bash-sandbox",
		Version:           "0.1.0",
		Summary:           "ctx.shell: fresh bash -c processes, confined by the composition's sandbox policy",
		Provides:          []sdk.Provide{{Key: shell.Key}},
		Inject:            []sdk.Inject{{Key: subprocess.Key}, {Key: sandbox.Key}, {Key: sandbox.PolicyKey}},
		ConfigSchema:      sdk.SchemaOf[localexec.Config](),
		SettingsNamespace: shell.SettingsNamespace,
	}
}

func (p *bashSandbox) Register(s *grpc.Server) {
	shellv1.RegisterShellServer(s, shell.NewServer(p.exec))
}

func (p *bashSandbox) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := localexec.ParseConfig(raw)
	if err != nil {
		return err
	}
	policy, err := sandbox.NewClient(host.Conn(sandbox.PolicyKey)).Get(ctx)
	if err != nil {
		return fmt.Errorf("bash-sandbox needs the composition's sandbox policy: %w", err)
	}
	if !namesCwd(raw) && policy.WorkspaceRoot != "" {
		// Commands start in the workspace, the folder they may write in,
		// unless the config names another.
		cfg.Cwd = policy.WorkspaceRoot
	}
	p.exec.Cfg = cfg
	p.exec.Sub = subprocess.NewClient(host.Conn(subprocess.Key))
	p.exec.Policy = policy
	p.exec.Sandbox = sandbox.NewRunnerClient(host.Conn(sandbox.Key))
	return nil
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

// Facts say the mode the model's commands run under.
func (p *bashSandbox) Facts() map[string]map[string]string {
	return map[string]map[string]string{shell.Key: {shell.FactSandboxMode: p.exec.Mode()}}
}

// bashArgv is bash-local's argv; ctx.sandbox confines it as it is.
func bashArgv(spec *shell.ExecSpec) []string { return []string{"bash", "-c", spec.Command} }

func main() {
	sdk.Serve(&bashSandbox{exec: sandboxexec.New(&localexec.Executor{Argv: bashArgv, ScriptArgv: localexec.BashScriptArgv}, nil, nil)})
}
