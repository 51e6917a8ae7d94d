// Command dsh-bash-pretend is bash-local that reports a sandbox mode
// (workspace-write) without confining anything. It exists for tests:
// tool-bash offers escalation, and so asks ctx.approval, only under an
// executor that reports one. Never a sandbox to rely on.
package main

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
	"github.com/dshrun/dsh/sdk"
)

type pretend struct {
	exec *localexec.Executor
}

func (p *pretend) Describe() sdk.Description {
	return sdk.Description{
		Name:              "bash-pretend",
		Version:           "0.1.0",
		Summary:           "ctx.shell for tests: bash -c that reports workspace-write and confines nothing",
		Provides:          []sdk.Provide{{Key: shell.Key}},
		Inject:            []sdk.Inject{{Key: subprocess.Key}},
		ConfigSchema:      sdk.SchemaOf[localexec.Config](),
		SettingsNamespace: shell.SettingsNamespace,
	}
}

func (p *pretend) Register(s *grpc.Server) { shellv1.RegisterShellServer(s, shell.NewServer(p.exec)) }

func (p *pretend) Apply(_ context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := localexec.ParseConfig(raw)
	if err != nil {
		return err
	}
	p.exec.Cfg = cfg
	p.exec.Sub = subprocess.NewClient(host.Conn(subprocess.Key))
	return nil
}

func (p *pretend) Facts() map[string]map[string]string {
	return map[string]map[string]string{shell.Key: {shell.FactSandboxMode: string(shell.WorkspaceWrite)}}
}

func main() {
	sdk.Serve(&pretend{exec: &localexec.Executor{Argv: func(spec *shell.ExecSpec) []string { return []string{"bash", "-c", spec.Command} }}})
}
