// Command dsh-tool-terminal is the model-facing terminal tools: it
// registers terminal_open, terminal_send, terminal_read, terminal_signal,
// terminal_close and terminal_list with ctx.tools and serves them through
// ctx.terminals, whose sessions belong to the agent of the call (so every
// tool sees the caller's terminals only). It owns every word the model
// reads about terminals.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/sdk"
)

// DefaultMaxOutputChars is the model budget of one result.
const DefaultMaxOutputChars = 30000

type toolTerminal struct {
	terms    terminals.Terminals
	maxChars int
}

func (p *toolTerminal) Describe() sdk.Description {
	return sdk.Description{
		Name:         "tool-terminal",
		Version:      "0.1.0",
		Summary:      "the model-facing persistent terminals: open, send, read, signal, close, list",
		Inject:       []sdk.Inject{{Key: terminals.Key}, {Key: tools.Key}},
		ConfigSchema: sdk.SchemaOf[config](),
		Tools:        toolNames,
	}
}

var _ tools.Handler = (*toolTerminal)(nil)

func (p *toolTerminal) Register(s *grpc.Server) {
	toolsv1.RegisterToolHandlerServer(s, tools.NewHandlerServer(p))
}

func (p *toolTerminal) Dispose(context.Context) error { return nil }

// config is tool-terminal's config.
type config struct {
	MaxOutputChars int `json:"maxOutputChars" minimum:"100" desc:"characters of a terminal's screen and unread scrollback one result shows (30000)"`
}

func (p *toolTerminal) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return err
	}
	p.maxChars = cfg.MaxOutputChars
	if p.maxChars <= 0 {
		p.maxChars = DefaultMaxOutputChars
	}
	p.terms = terminals.NewClient(host.Conn(terminals.Key))
	return tools.Register(ctx, host.Conn(tools.Key), toolSpecs(p.maxChars)...)
}

// args are every tool's arguments (validated by the host against the
// schemas before they get here).
type args struct {
	SessionID string `json:"session_id"`
	Name      string `json:"name"`
	Cwd       string `json:"cwd"`
	Cols      int    `json:"cols"`
	Rows      int    `json:"rows"`
	Text      string `json:"text"`
	Submit    *bool  `json:"submit"`
	Signal    string `json:"signal"`
	Target    string `json:"target"`
	WaitMs    *int64 `json:"waitMs"`
}

func (p *toolTerminal) Call(ctx context.Context, req *toolsv1.CallRequest) (*toolsv1.CallResult, error) {
	var a args
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return errorResult("bad arguments: " + err.Error()), nil
	}
	switch req.Name {
	case "terminal_open":
		s, err := p.terms.Open(ctx, &terminals.OpenRequest{Name: a.Name, Cwd: a.Cwd, Cols: uint32(orDefault(a.Cols, 120)), Rows: uint32(orDefault(a.Rows, 40))})
		if err != nil {
			return failed(err, ""), nil
		}
		return result(renderOpened(s), facts{Session: sessionFacts(s)}), nil
	case "terminal_send":
		id, refused := p.resolve(ctx, a.SessionID)
		if refused != nil {
			return refused, nil
		}
		submit := a.Submit == nil || *a.Submit
		wait := int64(2000)
		if a.WaitMs != nil {
			wait = *a.WaitMs
		}
		r, err := p.terms.Send(ctx, &terminals.SendRequest{Id: id, Text: a.Text, Submit: submit, Signal: a.Signal, WaitMs: wait, Budget: int64(p.maxChars)})
		if err != nil {
			return p.fail(ctx, err, id), nil
		}
		return failedIf(result(renderSent(r), sentFacts(r)), exitedBadly(r.Session)), nil
	case "terminal_read":
		id, refused := p.resolve(ctx, a.SessionID)
		if refused != nil {
			return refused, nil
		}
		var wait time.Duration
		if a.WaitMs != nil {
			wait = time.Duration(*a.WaitMs) * time.Millisecond
		}
		o, err := p.terms.Read(ctx, id, wait, p.maxChars)
		if err != nil {
			return p.fail(ctx, err, id), nil
		}
		return failedIf(result(renderRead(o), readFacts(o)), exitedBadly(o.Session)), nil
	case "terminal_signal":
		id, refused := p.resolve(ctx, a.SessionID)
		if refused != nil {
			return refused, nil
		}
		target := terminals.TargetForeground
		if a.Target == "shell" {
			target = terminals.TargetShell
		}
		// A SIGKILL for the shell is refused by ctx.terminals, once it
		// knows the terminal is there.
		r, err := p.terms.Signal(ctx, id, a.Signal, target)
		if err != nil {
			return p.fail(ctx, err, id), nil
		}
		return failedIf(result(renderSignalled(r, a.Signal, a.Target), facts{Session: sessionFacts(r.Session), Delivered: &r.Delivered}), exitedBadly(r.Session)), nil
	case "terminal_close":
		id, refused := p.resolve(ctx, a.SessionID)
		if refused != nil {
			return refused, nil
		}
		s, err := p.terms.Close(ctx, id)
		if err != nil {
			return p.fail(ctx, err, id), nil
		}
		return result(renderClosed(s), facts{Session: sessionFacts(s)}), nil
	case "terminal_list":
		list, err := p.terms.List(ctx)
		if err != nil {
			return failed(err, ""), nil
		}
		fs := make([]*sessionFact, 0, len(list))
		for _, s := range list {
			fs = append(fs, sessionFacts(s))
		}
		return result(renderList(list), facts{Sessions: fs}), nil
	}
	return errorResult("tool-terminal has no tool " + req.Name), nil
}

// fullID is the form of the ids ctx.terminals makes: those go to it as
// they are, with no list of the caller's terminals first.
var fullID = regexp.MustCompile(`^t[0-9]+-[0-9a-f]{12}$`)

// resolve is the id of the caller's terminal the model named: its id, the
// name it was opened with (names are unique among the caller's
// terminals), or its short id (t1, or a longer start of its id), when that
// names one terminal; else the result that says it names none (and which
// there are) or several. Only the caller's terminals are ever listed.
func (p *toolTerminal) resolve(ctx context.Context, given string) (string, *toolsv1.CallResult) {
	if fullID.MatchString(given) {
		return given, nil
	}
	list, err := p.terms.List(ctx)
	if err != nil {
		return "", failed(err, given)
	}
	var found []*terminals.Session
	for _, s := range list {
		if s.Id == given || s.Name == given || shortFor(s.Id, given) {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 1:
		return found[0].Id, nil
	case 0:
		return "", errorResult(noTerminal(given, list))
	}
	return "", errorResult(ambiguous(given, found))
}

// shortFor reports whether given is id's short form (t1 of t1-0a1b...)
// or a longer start of it.
func shortFor(id, given string) bool {
	i := strings.IndexByte(id, '-')
	if i < 0 {
		return false
	}
	short := id[:i]
	return given == short || strings.HasPrefix(given, short+"-") && strings.HasPrefix(id, given)
}

// fail is failed, with the caller's terminals named when the one asked
// for is not there (closed meanwhile, or never the caller's).
func (p *toolTerminal) fail(ctx context.Context, err error, id string) *toolsv1.CallResult {
	if errors.Is(err, terminals.ErrNoSession) || errors.Is(err, terminals.ErrForeignSession) {
		if list, lerr := p.terms.List(ctx); lerr == nil {
			return errorResult(noTerminal(id, list))
		}
	}
	return failed(err, id)
}

func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func result(text string, f any) *toolsv1.CallResult {
	b, _ := json.Marshal(f)
	return &toolsv1.CallResult{Text: text, Structured: b}
}

// failedIf marks r an error when failed.
func failedIf(r *toolsv1.CallResult, failed bool) *toolsv1.CallResult {
	r.IsError = failed
	return r
}

// errorResult is a call that could not do what it was asked: one
// bracketed sentence.
func errorResult(sentence string) *toolsv1.CallResult {
	b, _ := json.Marshal(map[string]string{"error": sentence})
	return &toolsv1.CallResult{Text: "[" + sentence + "]", Structured: b, IsError: true}
}

func main() { sdk.Serve(&toolTerminal{}) }
