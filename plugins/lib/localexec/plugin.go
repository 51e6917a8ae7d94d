package localexec

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
	"github.com/dshrun/dsh/sdk"
)

// Plugin is a plugin that provides ctx.shell with an Executor: its config
// is Config and the executor's own keys (Executor.Own), the `shell`
// settings under the entry's, read at Apply, and its commands run through
// ctx.subprocess. A plugin binary is one Plugin served with sdk.Serve.
type Plugin struct {
	Name, Version, Summary string
	// Exec runs the commands; Apply gives it its config and ctx.subprocess.
	Exec *Executor
	// Serve is what ctx.shell is served by: Exec when nil, else an
	// executor over Exec (one that confines its commands).
	Serve shell.Executor
	// Inject are the keys Serve calls besides ctx.subprocess.
	Inject []sdk.Inject
	// Setup, if set, wires Serve at Apply, after the config is read and
	// before Exec takes it; it may change cfg. raw is the config as given.
	// An error fails Apply and leaves Exec as it was.
	Setup func(ctx context.Context, host *sdk.Host, raw json.RawMessage, cfg *Config) error
	// Mode, if set, is the sandbox mode the plugin reports after Apply
	// (the shell.FactSandboxMode fact).
	Mode func() string
}

var (
	_ sdk.Registrar     = (*Plugin)(nil)
	_ sdk.FactsReporter = (*Plugin)(nil)
)

func (p *Plugin) Describe() sdk.Description {
	schema := sdk.SchemaOf[Config]()
	if p.Exec.Own != nil {
		schema = p.Exec.Own.Schema
	}
	return sdk.Description{
		Name:              p.Name,
		Version:           p.Version,
		Summary:           p.Summary,
		Provides:          []sdk.Provide{{Key: shell.Key}},
		Inject:            append([]sdk.Inject{{Key: subprocess.Key}}, p.Inject...),
		ConfigSchema:      schema,
		SettingsNamespace: shell.SettingsNamespace,
	}
}

func (p *Plugin) Register(s *grpc.Server) {
	serve := p.Serve
	if serve == nil {
		serve = p.Exec
	}
	shellv1.RegisterShellServer(s, shell.NewServer(serve))
}

func (p *Plugin) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, take, err := p.Exec.parseConfig(raw)
	if err != nil {
		return err
	}
	if p.Setup != nil {
		if err := p.Setup(ctx, host, raw, &cfg); err != nil {
			return err
		}
	}
	take()
	p.Exec.Cfg = cfg
	p.Exec.Sub = subprocess.NewClient(host.Conn(subprocess.Key))
	return nil
}

// Facts say the sandbox mode of a plugin that has one; the others report
// none.
func (p *Plugin) Facts() map[string]map[string]string {
	if p.Mode == nil {
		return nil
	}
	return map[string]map[string]string{shell.Key: {shell.FactSandboxMode: p.Mode()}}
}

// Bash is an executor of fresh `bash -c` processes.
func Bash() *Executor { return &Executor{Argv: BashArgv, ScriptArgv: BashScriptArgv} }

// BashArgv is the bash -c argv (a command longer than ArgvMax goes by
// BashScriptArgv). A sandboxing executor confines it as it is.
func BashArgv(spec *shell.ExecSpec) []string { return []string{"bash", "-c", spec.Command} }
