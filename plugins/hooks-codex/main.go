// Command dsh-hooks-codex runs the hooks of Codex's hook files
// (hooks.json and the [hooks] table of config.toml, in the user's Codex
// home and the project's .codex folder) on dsh's tool calls: their
// PreToolUse hooks before a call (to block it or rewrite its command) and
// their PostToolUse hooks after it (to give the model feedback, or stop),
// with Codex's semantics, through ctx.shell (so a sandboxing executor
// confines them too). It intercepts the calls through ctx.tools. The hooks
// are read once, when the bridge is applied.
package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/lib/hookbridge"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

// config is hooks-codex's config.
type config struct {
	ProjectDir string `json:"projectDir" desc:"the project whose .codex folder is read, and where hooks run (this plugin's working directory)"`
	// HooksFiles replaces the files read; relative paths are under
	// projectDir; a .toml file is read for its [hooks] table.
	HooksFiles []string `json:"hooksFiles" desc:"the files to read instead of Codex's (<codexHome>/hooks.json, <codexHome>/config.toml, <projectDir>/.codex/hooks.json, <projectDir>/.codex/config.toml); .toml files for their [hooks] table"`
	CodexHome  string   `json:"codexHome" desc:"Codex's home folder ($CODEX_HOME, else ~/.codex)"`
	Model      string   `json:"model" desc:"the model hooks are told of (\"\")"`
	// BashTools are the tools the hooks see as Bash.
	BashTools []string `json:"bashTools" desc:"the dsh tools the hooks see as Bash, their command as its command ([bash]); others are mcp__dsh__<tool>"`
}

type bridge struct {
	log    hclog.Logger
	cfg    config
	hooks  *loaded
	runner *hookbridge.Runner
	ids    *hookbridge.IDs
}

func (b *bridge) Describe() sdk.Description {
	return sdk.Description{
		Name:         "hooks-codex",
		Version:      "0.1.0",
		Summary:      "runs the PreToolUse and PostToolUse hooks of Codex's hooks.json and config.toml on dsh's tool calls",
		Inject:       []sdk.Inject{{Key: shell.Key}, {Key: tools.Key}},
		ConfigSchema: sdk.SchemaOf[config](),
	}
}

func (b *bridge) Register(s *grpc.Server) {
	toolsv1.RegisterToolInterceptorServer(s, tools.NewInterceptorServer(b))
}

// resolve fills in the folders: the working directory, Codex's home as
// Codex finds it.
func resolve(cfg config, getenv func(string) string) (config, error) {
	var err error
	if cfg.ProjectDir, err = hookbridge.ProjectDir(cfg.ProjectDir); err != nil {
		return cfg, err
	}
	if cfg.CodexHome == "" {
		if cfg.CodexHome = getenv("CODEX_HOME"); cfg.CodexHome == "" {
			if home := getenv("HOME"); home != "" {
				cfg.CodexHome = filepath.Join(home, ".codex")
			}
		}
	}
	if cfg.CodexHome != "" && !filepath.IsAbs(cfg.CodexHome) {
		cfg.CodexHome = filepath.Join(cfg.ProjectDir, cfg.CodexHome)
	}
	return cfg, nil
}

// read reads the config and the hooks files it names: all Apply reads,
// and all Check checks.
func read(raw json.RawMessage) (config, *loaded, error) {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return cfg, nil, err
	}
	if cfg, err = resolve(cfg, os.Getenv); err != nil {
		return cfg, nil, err
	}
	l, err := load(cfg)
	return cfg, l, err
}

// Check reads the hooks files as Apply would (dsh validate).
func (b *bridge) Check(_ context.Context, raw json.RawMessage) error {
	_, _, err := read(raw)
	return err
}

func (b *bridge) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, l, err := read(raw)
	if err != nil {
		return err
	}
	b.log, b.cfg, b.hooks = host.Logger(), cfg, l
	for _, n := range l.notes {
		b.log.Info(n)
	}
	// Codex gives hooks no variables of its own: they inherit the
	// executor's environment.
	b.runner = &hookbridge.Runner{Shell: shell.NewClient(host.Conn(shell.Key), ""), Dir: cfg.ProjectDir}
	b.ids = hookbridge.NewIDs()
	all := &hookbridge.Set{Groups: append(append([]hookbridge.Group{}, l.sync.Groups...), l.async.Groups...)}
	b.log.Info("hooks read", "PreToolUse", len(all.Patterns(hookbridge.PreToolUse)), "PostToolUse", len(all.Patterns(hookbridge.PostToolUse)), "groups", len(all.Groups))
	return tools.NewClient(host.Conn(tools.Key)).Intercept(ctx, hookbridge.Interception(all, l.sync, cfg.BashTools))
}

func main() { sdk.Serve(&bridge{}) }
