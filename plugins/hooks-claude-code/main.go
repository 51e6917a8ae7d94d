// Command dsh-hooks-claude-code runs the hooks of Claude Code settings files
// on dsh's tool calls: their PreToolUse hooks before a call (to allow,
// deny, ask or rewrite it) and their PostToolUse hooks after it (to give
// the model feedback), as Claude Code would run them, through ctx.shell (so
// a sandboxing executor confines them too). It intercepts the calls through
// ctx.tools. The hooks are read once, when the bridge is applied: a command
// that edits a settings file changes nothing until the bridge is reloaded.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/lib/hookbridge"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

// config is hooks-claude-code's config.
type config struct {
	ProjectDir string `json:"projectDir" desc:"the project whose .claude folder is read, and where hooks run (this plugin's working directory)"`
	// SettingsFiles replaces the files read (managed, user, project,
	// local); relative paths are under projectDir.
	SettingsFiles []string `json:"settingsFiles" desc:"the settings files to read instead of Claude Code's (managed, ~/.claude/settings.json, .claude/settings.json, .claude/settings.local.json)"`
	// ManagedSettings is the managed settings file, read first.
	ManagedSettings string `json:"managedSettings" default:"/etc/claude-code/managed-settings.json" desc:"the managed settings file, read first (/etc/claude-code/managed-settings.json)"`
	// BashTools are the tools the hooks see as Bash.
	BashTools []string `json:"bashTools" desc:"the dsh tools the hooks see as Bash, their command as its command ([bash]); others are mcp__dsh__<tool>"`
}

// defaultTimeout is a hook's timeout when it names none (Claude Code's).
const defaultTimeout = 60 * time.Second

type bridge struct {
	log    hclog.Logger
	cfg    config
	set    *hookbridge.Set
	runner *hookbridge.Runner
	ids    *hookbridge.IDs
}

func (b *bridge) Describe() sdk.Description {
	return sdk.Description{
		Name:         "hooks-claude-code",
		Version:      "0.1.0",
		Summary:      "runs the PreToolUse and PostToolUse hooks of Claude Code settings files on dsh's tool calls",
		Inject:       []sdk.Inject{{Key: shell.Key}, {Key: tools.Key}},
		ConfigSchema: sdk.SchemaOf[config](),
	}
}

func (b *bridge) Register(s *grpc.Server) {
	toolsv1.RegisterToolInterceptorServer(s, tools.NewInterceptorServer(b))
}

// read reads the config and the settings files it names: all Apply reads,
// and all Check checks.
func read(raw json.RawMessage) (config, *hookbridge.Set, []string, error) {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return cfg, nil, nil, err
	}
	if cfg.ProjectDir, err = hookbridge.ProjectDir(cfg.ProjectDir); err != nil {
		return cfg, nil, nil, err
	}
	set, notes, err := load(cfg, os.Getenv("HOME"))
	return cfg, set, notes, err
}

// Check reads the settings files as Apply would (dsh validate).
func (b *bridge) Check(_ context.Context, raw json.RawMessage) error {
	_, _, _, err := read(raw)
	return err
}

func (b *bridge) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, set, notes, err := read(raw)
	if err != nil {
		return err
	}
	b.log, b.cfg, b.set = host.Logger(), cfg, set
	for _, n := range notes {
		b.log.Info(n)
	}
	b.runner = &hookbridge.Runner{Shell: shell.NewClient(host.Conn(shell.Key), ""), Dir: cfg.ProjectDir, Env: map[string]string{"CLAUDE_PROJECT_DIR": cfg.ProjectDir}}
	b.ids = hookbridge.NewIDs()
	b.log.Info("hooks read", "PreToolUse", len(set.Patterns(hookbridge.PreToolUse)), "PostToolUse", len(set.Patterns(hookbridge.PostToolUse)), "groups", len(set.Groups))
	return tools.NewClient(host.Conn(tools.Key)).Intercept(ctx, hookbridge.Interception(set, set, cfg.BashTools))
}

// settingsFiles are the files read, in order.
func settingsFiles(cfg config, home string) []string {
	if len(cfg.SettingsFiles) > 0 {
		out := make([]string, 0, len(cfg.SettingsFiles))
		for _, f := range cfg.SettingsFiles {
			if !filepath.IsAbs(f) {
				f = filepath.Join(cfg.ProjectDir, f)
			}
			out = append(out, f)
		}
		return out
	}
	var out []string
	if cfg.ManagedSettings != "" {
		out = append(out, cfg.ManagedSettings)
	}
	if home != "" {
		out = append(out, filepath.Join(home, ".claude", "settings.json"))
	}
	return append(out,
		filepath.Join(cfg.ProjectDir, ".claude", "settings.json"),
		filepath.Join(cfg.ProjectDir, ".claude", "settings.local.json"))
}

// settings is what a settings file says of hooks.
type settings struct {
	Hooks           map[string][]group `json:"hooks"`
	DisableAllHooks bool               `json:"disableAllHooks"`
}

type group struct {
	Matcher string    `json:"matcher"`
	Hooks   []command `json:"hooks"`
}

type command struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Timeout *float64 `json:"timeout"`
}

// load reads the settings files (a missing one is no hooks) and checks
// every hook, naming the file and line of what is wrong.
func load(cfg config, home string) (*hookbridge.Set, []string, error) {
	set := &hookbridge.Set{}
	var notes []string
	disabled := ""
	for _, file := range settingsFiles(cfg, home) {
		raw, err := os.ReadFile(file)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read hooks: %w", err)
		}
		var s settings
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, fmt.Errorf("read hooks: %w", hookbridge.SyntaxError(file, raw, err))
		}
		if s.DisableAllHooks {
			disabled = file
		}
		at := hookbridge.Locate(file, raw)
		for _, event := range sortedKeys(s.Hooks) {
			if event != hookbridge.PreToolUse && event != hookbridge.PostToolUse {
				notes = append(notes, fmt.Sprintf("%s: %s hooks are not run: dsh sees tool calls, not Claude Code's %s", at.At("hooks/"+event), event, event))
				continue
			}
			for gi, g := range s.Hooks[event] {
				gpath := fmt.Sprintf("hooks/%s/%d", event, gi)
				var hs []hookbridge.Hook
				for hi, c := range g.Hooks {
					hpath := fmt.Sprintf("%s/hooks/%d", gpath, hi)
					switch {
					case c.Type != "command":
						return nil, nil, fmt.Errorf("%s: a hook of type %q: dsh runs command hooks only, and will not start with a hook it cannot run", at.At(hpath), c.Type)
					case strings.TrimSpace(c.Command) == "":
						return nil, nil, fmt.Errorf("%s: a command hook with no command", at.At(hpath))
					case c.Timeout != nil && *c.Timeout <= 0:
						return nil, nil, fmt.Errorf("%s: timeout %v: give seconds, more than 0", at.At(hpath+"/timeout"), *c.Timeout)
					}
					timeout := defaultTimeout
					if c.Timeout != nil {
						timeout = time.Duration(*c.Timeout * float64(time.Second))
					}
					hs = append(hs, hookbridge.Hook{Command: c.Command, Timeout: min(timeout, 10*time.Minute-10*time.Second), Where: at.At(hpath)})
				}
				where := at.At(gpath + "/matcher")
				if g.Matcher == "" {
					where = at.At(gpath)
				}
				grp, err := hookbridge.NewGroup(event, g.Matcher, where, hs)
				if err != nil {
					return nil, nil, err
				}
				set.Groups = append(set.Groups, grp)
			}
		}
	}
	if disabled != "" {
		return &hookbridge.Set{}, append(notes, disabled+": disableAllHooks is set: no hook runs"), nil
	}
	return set, notes, nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func main() { sdk.Serve(&bridge{}) }
