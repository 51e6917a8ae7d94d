// Package persistentshell is the machinery of a persistent shell tool: a
// plugin that registers one tool with ctx.tools and runs each command in a
// shell of the calling agent's own that lives on between calls, a
// ctx.terminals session (so the working directory, variables and functions
// carry over, and the shell shows in terminal_list). An agent's calls run
// one at a time. Each command is typed in a line that frames it with a
// start and an end marker, each with a fresh nonce; ctx.terminals waits
// for the end marker and returns what came between. A shell that gives no
// true end is closed and replaced, and a fresh shell is always said. It
// owns every word the model reads about these commands but the tool's own
// description.
//
// A plugin supplies its Dialect: what is typed for a command in its shell's
// language, how the end marker's line reads, the tool as the model sees it,
// and how its shell behaves on a terminal (Shell).
package persistentshell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/sdk"
)

// Config is a persistent tool's config, as its plugin decoded it (each
// plugin declares the same fields with its own defaults and words).
type Config struct {
	ToolName string
	// Backend is the ctx.terminals backend the shells open with; empty
	// means the only one registered.
	Backend string
	Cwd     string
	// MaxOutputChars is the model budget of one result.
	MaxOutputChars   int
	DefaultTimeoutMs int64
	MaxTimeoutMs     int64
}

// The defaults of Config.
const (
	defaultMaxOutputChars = 30000
	defaultTimeoutMs      = 120000
	maxTimeoutMs          = 600000
)

// Nonces are one call's, each fresh: the start marker's and the end
// marker's.
type Nonces struct{ Start, End string }

// Line is one line typed into the shell (Enter is added), and the markers
// that frame what it prints: its output starts after the first line that
// holds From and ends before Until, whose line's rest the dialect reads.
type Line struct {
	Text, From, Until string
}

// Typed is what is typed for one command.
type Typed struct {
	Line
	// Confirm, when set, is typed once Line's end marker came, and proves
	// that end true: the shell reads it only after Line (the command
	// included) is done, so what it prints cannot come from the command.
	// Its From and Until lines come straight one after the other; anything
	// between them (From printed by the command too) means the first end
	// was not the true one. The rest of its Until line is the command's
	// status (Line's is then only whether the shell can be trusted).
	Confirm *Line
}

// Dialect is what a shell language adds to the machinery.
type Dialect interface {
	// Type is what is typed to run command, with the call's nonces.
	Type(command string, n Nonces) Typed
	// Status reads the rest of the end marker's line: the command's exit
	// status, or false when the line says the shell could not run it as
	// typed (what it reports cannot be trusted).
	Status(rest string) (status int, ok bool)
	// Tool is the tool as the model sees it under cfg.
	Tool(cfg Config) *toolsv1.ToolSpec
	// Shell is how the dialect's shell behaves on a terminal.
	Shell() Shell
}

// Shell is how a dialect's shell behaves on a terminal.
type Shell struct {
	// Dialect, when set, is the dialect a session must speak (its
	// backend's): a session of another is closed, and the call fails.
	Dialect string
	// Interrupt is the interrupt as the model reads it ("SIGINT").
	Interrupt string
	// InterruptKeys, when set, are typed to interrupt what runs (as a key
	// pressed: a line editor reading in raw mode takes them, the terminal
	// turns them into a signal otherwise); empty sends SIGINT to the
	// foreground.
	InterruptKeys string
	// AwaitPrompt: a fresh shell is given its first command only once its
	// prompt shows (a shell that reads the terminal while it starts could
	// take a line typed early for something else).
	AwaitPrompt bool
	// CutShort: the shell cuts a line short as a matter of course, and is
	// back at its prompt without the end marker (a PowerShell terminating
	// error ends what is left of the line). The Confirm line then tells
	// how the command ended, and the prompt is not shown as its output.
	// Without it such a line is one that cannot be trusted.
	CutShort bool
}

// Plugin is a persistent tool plugin.
type Plugin struct {
	Name, Version, Summary string
	// ConfigSchema is the plugin's config schema (sdk.SchemaOf of its
	// config type); Decode decodes a config it validates.
	ConfigSchema string
	Decode       func(json.RawMessage) (Config, error)
	Dialect      Dialect
}

// New is the plugin p, ready for sdk.Serve.
func New(p Plugin) sdk.Plugin { return &persistent{plugin: p, shell: p.Dialect.Shell()} }

type persistent struct {
	plugin Plugin
	shell  Shell
	cfg    Config
	terms  terminals.Terminals

	mu     sync.Mutex
	owners map[string]*ownerShell
}

// ownerShell is one agent's persistent shell, as this plugin knows it.
type ownerShell struct {
	turn chan struct{} // held by the call that runs; calls queue on it
	id   string        // its session; empty before the first call and after an end
	// clean: the last command ended with its marker, so the shell is back
	// at its prompt. Otherwise the next call looks first.
	clean bool
}

func (p *persistent) Describe() sdk.Description {
	return sdk.Description{
		Name:            p.plugin.Name,
		Version:         p.plugin.Version,
		Summary:         p.plugin.Summary,
		Inject:          []sdk.Inject{{Key: terminals.Key}, {Key: tools.Key}},
		ConfigSchema:    p.plugin.ConfigSchema,
		ToolsFromConfig: []string{"toolName"},
	}
}

var _ tools.Handler = (*persistent)(nil)

func (p *persistent) Register(s *grpc.Server) {
	toolsv1.RegisterToolHandlerServer(s, tools.NewHandlerServer(p))
}

func (p *persistent) Dispose(context.Context) error { return nil }

func (p *persistent) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := p.plugin.Decode(raw)
	if err != nil {
		return err
	}
	if cfg.MaxOutputChars <= 0 {
		cfg.MaxOutputChars = defaultMaxOutputChars
	}
	if cfg.MaxTimeoutMs <= 0 {
		cfg.MaxTimeoutMs = maxTimeoutMs
	}
	if cfg.DefaultTimeoutMs <= 0 {
		cfg.DefaultTimeoutMs = min(defaultTimeoutMs, cfg.MaxTimeoutMs)
	}
	if cfg.DefaultTimeoutMs > cfg.MaxTimeoutMs {
		return errors.New("defaultTimeoutMs is longer than maxTimeoutMs")
	}
	p.cfg = cfg
	p.owners = map[string]*ownerShell{}
	p.terms = terminals.NewClient(host.Conn(terminals.Key))
	return tools.Register(ctx, host.Conn(tools.Key), p.plugin.Dialect.Tool(cfg))
}

// args are the tool's arguments (validated by the host against the schema
// before they get here).
type args struct {
	Command   string `json:"command"`
	TimeoutMs int64  `json:"timeoutMs"`
}

func (p *persistent) Call(ctx context.Context, req *toolsv1.CallRequest) (*toolsv1.CallResult, error) {
	if req.Name != p.cfg.ToolName {
		return errorResult(p.plugin.Name + " has no tool " + req.Name), nil
	}
	var a args
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return errorResult("bad arguments: " + err.Error()), nil
	}
	if strings.ContainsRune(a.Command, 0) {
		return errorResult("the command holds a NUL character, which a shell cannot take"), nil
	}
	timeout := a.TimeoutMs
	if timeout <= 0 {
		timeout = p.cfg.DefaultTimeoutMs
	}
	if timeout > p.cfg.MaxTimeoutMs {
		return errorResult("timeoutMs is at most " + strconv.FormatInt(p.cfg.MaxTimeoutMs, 10)), nil
	}
	sh := p.shellOf(req.Owner)
	select {
	case sh.turn <- struct{}{}:
	case <-ctx.Done():
		return errorResult(sentence(ctx.Err())), nil
	}
	defer func() { <-sh.turn }()
	r, err := p.run(ctx, sh, a.Command, timeout)
	if err != nil {
		return errorResult(sentence(err)), nil
	}
	return r.result(p.cfg.MaxOutputChars), nil
}

// shellOf is owner's shell record.
func (p *persistent) shellOf(owner string) *ownerShell {
	p.mu.Lock()
	defer p.mu.Unlock()
	sh := p.owners[owner]
	if sh == nil {
		sh = &ownerShell{turn: make(chan struct{}, 1)}
		p.owners[owner] = sh
	}
	return sh
}

// sessionName is the name the tool's shell has among the agent's
// terminals: a process of this plugin after a reload or a crash finds it
// by that name and goes on in it.
func (p *persistent) sessionName() string { return "persistent-" + p.cfg.ToolName }

// NewNonce is a fresh nonce: 24 hex digits.
func NewNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// captureBytes is what the host keeps of a command's output for a budget
// of chars characters: enough for the last lines within it however wide
// their characters, and the head the host keeps besides.
func captureBytes(chars int) int { return 2 * 4 * (chars + 1024) }
