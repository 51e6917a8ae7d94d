// Command dsh-shell-env is the plugin that provides ctx.shellEnv: the
// registry of trusted DSH_* facts. DSH_HOME is built in (from DSH_HOME, else
// ~/.dsh); the composition may add facts under config.facts; other plugins
// register facts through the host and lose them when they go away.
package main

import (
	"context"
	"encoding/json"
	"os"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/plugins/shellenv"
	"github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
	"github.com/dshrun/dsh/sdk"
)

type config struct {
	Facts map[string]string `json:"facts" keys:"^DSH_[A-Z0-9_]+$" desc:"Extra DSH_* facts every execution sees."`
}

type shellEnv struct {
	reg *Registry
}

func (p *shellEnv) Describe() sdk.Description {
	return sdk.Description{
		Name:         "shell-env",
		Version:      "0.1.0",
		Summary:      "ctx.shellEnv: trusted DSH_* facts for shell executions",
		Provides:     []sdk.Provide{{Key: shellenv.Key, CallerState: true}},
		ConfigSchema: sdk.SchemaOf[config](),
	}
}

func (p *shellEnv) Register(s *grpc.Server) {
	shellenvv1.RegisterShellEnvServer(s, shellenv.NewServer(facts{p.reg}))
}

// facts is ctx.shellEnv over the plugin's registry. The owner of a
// registration is the calling plugin as the host names it (sdk.Caller),
// never one the request could name.
type facts struct{ reg *Registry }

var _ shellenv.Env = facts{}

func (f facts) Collect(context.Context) (shellenv.Snapshot, error) { return f.reg.Collect(), nil }

func (f facts) Register(ctx context.Context, name, value string) error {
	return f.reg.Register(sdk.Caller(ctx), name, value)
}

func (f facts) Unregister(ctx context.Context, name string) error {
	return f.reg.Unregister(sdk.Caller(ctx), name)
}

func (f facts) List(context.Context) ([]shellenv.Fact, error) { return f.reg.List(), nil }

func (f facts) Watch(ctx context.Context, send func(shellenv.Snapshot) error) error {
	return f.reg.Watch(ctx, send)
}

func (p *shellEnv) Apply(_ context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return err
	}
	for name, value := range cfg.Facts {
		if err := p.reg.Register(shellenv.OwnerConfig, name, value); err != nil {
			return err
		}
	}
	host.Logger().Debug("shell-env ready", "facts", len(p.reg.List()))
	return nil
}

func (p *shellEnv) Release(_ context.Context, caller string) error {
	p.reg.Release(caller)
	return nil
}

func main() {
	sdk.Serve(&shellEnv{reg: NewRegistry(DefaultHome(os.LookupEnv))})
}
