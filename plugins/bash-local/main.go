// Command dsh-bash-local is the default POSIX executor: it provides
// ctx.shell by running each command as a fresh `bash -c` process through
// ctx.subprocess.
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

type bashLocal struct {
	exec *localexec.Executor
}

func (p *bashLocal) Describe() sdk.Description {
	return sdk.Description{
		Name:              "bash-local",
		Version:           "0.1.0",
		Summary:           "ctx.shell: fresh bash -c processes on this machine",
		Provides:          []sdk.Provide{{Key: shell.Key}},
		Inject:            []sdk.Inject{{Key: subprocess.Key}},
		ConfigSchema:      sdk.SchemaOf[localexec.Config](),
		SettingsNamespace: shell.SettingsNamespace,
	}
}

func (p *bashLocal) Register(s *grpc.Server) { shellv1.RegisterShellServer(s, shell.NewServer(p.exec)) }

func (p *bashLocal) Apply(_ context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := localexec.ParseConfig(raw)
	if err != nil {
		return err
	}
	p.exec.Cfg = cfg
	p.exec.Sub = subprocess.NewClient(host.Conn(subprocess.Key))
	return nil
}

// BashArgv is the public bash -c argv (a command longer than
// localexec.ArgvMax goes by localexec.BashScriptArgv). A sandboxing executor
// replaces it.
func BashArgv(spec *shell.ExecSpec) []string { return []string{"bash", "-c", spec.Command} }

func main() {
	sdk.Serve(&bashLocal{exec: &localexec.Executor{Argv: BashArgv, ScriptArgv: localexec.BashScriptArgv}})
}
