// Command dsh-termdrive is a test consumer of ctx.terminals: its one tool,
// term, makes the ctx.terminals call its arguments name, as the agent of the
// tool call, and answers with what came back (or the error's kind), so tests
// reach ctx.terminals through the host as a tool plugin does. Its config
// key toolName renames term, so two entries can sit side by side. With
// fail the tool fails with the error instead of answering with it, and
// with raw it closes through the generated client, as a plugin that uses
// no seam client does. Op spawn starts argv through ctx.subprocess, and
// hold keeps any call from answering until its context ends, as a tool
// that started something and then hung or was given up on.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/terminals/terminalsv1"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/sdk"
)

type termdrive struct {
	terms *terminals.Client
	raw   terminalsv1.TerminalsClient
	sub   *subprocess.Client
}

type config struct {
	ToolName string `json:"toolName" default:"term"`
}

func (p *termdrive) Describe() sdk.Description {
	return sdk.Description{
		Name:    "termdrive",
		Version: "0.0.1",
		Summary: "test consumer of ctx.terminals",
		Inject:  []sdk.Inject{{Key: terminals.Key}, {Key: tools.Key}, {Key: subprocess.Key}},
		// Its one tool is named by config (term by default).
		ToolsFromConfig: []string{"toolName"},
		ConfigSchema:    sdk.SchemaOf[config](),
	}
}

func (p *termdrive) Register(s *grpc.Server) {
	toolsv1.RegisterToolHandlerServer(s, tools.NewHandlerServer(p))
}

func (p *termdrive) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return err
	}
	p.terms = terminals.NewClient(host.Conn(terminals.Key))
	p.raw = terminalsv1.NewTerminalsClient(host.Conn(terminals.Key))
	p.sub = subprocess.NewClient(host.Conn(subprocess.Key))
	return tools.Register(ctx, host.Conn(tools.Key), &tools.ToolSpec{
		Name:        cfg.ToolName,
		Description: "calls ctx.terminals",
		InputSchema: `{"type":"object"}`,
	})
}

// args are a term call's arguments: the operation and its fields.
type args struct {
	Op      string `json:"op"`
	ID      string `json:"id"`
	Backend string `json:"backend"`
	Name    string `json:"name"`
	Cwd     string `json:"cwd"`
	Cols    int    `json:"cols"`
	Rows    int    `json:"rows"`
	Text    string `json:"text"`
	Submit  bool   `json:"submit"`
	Signal  string `json:"signal"`
	Shell   bool   `json:"shell"`
	WaitMs  int64  `json:"waitMs"`
	// SettleMs is a send's wait to settle; Budget a read's screen budget.
	SettleMs int64 `json:"settleMs"`
	Budget   int   `json:"budget"`
	// Outside makes the call with a context of no tool call.
	Outside bool `json:"outside"`
	// Fail fails the tool with the error; Raw makes a close through the
	// generated client.
	Fail bool `json:"fail"`
	Raw  bool `json:"raw"`
	// Argv is what spawn starts, in Cwd; Hold waits, after the op, for the
	// call's context to end and fails with its error.
	Argv []string `json:"argv"`
	Hold bool     `json:"hold"`
}

var kinds = []error{
	terminals.ErrDuplicateBackend, terminals.ErrDuplicateName, terminals.ErrForeignSession,
	terminals.ErrNoBackend, terminals.ErrNoSession, terminals.ErrOwnerNotLive,
	terminals.ErrSendActive, terminals.ErrServiceDisposing, terminals.ErrTooMany, terminals.ErrShellKill, terminals.ErrInvalid,
	sdk.ErrPermissionDenied, sdk.ErrProviderGone, sdk.ErrDeadline,
}

func (p *termdrive) Call(ctx context.Context, req *tools.CallRequest) (*tools.CallResult, error) {
	var a args
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return nil, err
	}
	if a.Outside {
		ctx = context.Background()
	}
	var msg proto.Message
	var err error
	switch a.Op {
	case "open":
		msg, err = p.terms.Open(ctx, &terminals.OpenRequest{Backend: a.Backend, Name: a.Name, Cwd: a.Cwd, Cols: uint32(a.Cols), Rows: uint32(a.Rows)})
	case "send":
		var sent *terminals.Sent
		sent, err = p.terms.Send(ctx, &terminals.SendRequest{Id: a.ID, Text: a.Text, Submit: a.Submit, Signal: a.Signal, WaitMs: a.SettleMs})
		// Without a wait the session alone is the answer, as a plain send's.
		msg = sent
		if err == nil && a.SettleMs == 0 {
			msg = sent.Session
		}
	case "read":
		msg, err = p.terms.Read(ctx, a.ID, time.Duration(a.WaitMs)*time.Millisecond, a.Budget)
	case "signal":
		target := terminals.TargetForeground
		if a.Shell {
			target = terminals.TargetShell
		}
		msg, err = p.terms.Signal(ctx, a.ID, a.Signal, target)
	case "resize":
		msg, err = p.terms.Resize(ctx, a.ID, a.Cols, a.Rows)
	case "close":
		if a.Raw {
			msg, err = p.raw.Close(ctx, &terminalsv1.SessionRef{Id: a.ID})
		} else {
			msg, err = p.terms.Close(ctx, a.ID)
		}
	case "spawn":
		msg, err = p.sub.Start(ctx, &subprocess.SpawnRequest{Argv: a.Argv, Dir: a.Cwd})
	case "list":
		var list []*terminals.Session
		list, err = p.terms.List(ctx)
		msg = &terminalsv1.ListResponse{Sessions: list}
	default:
		return nil, fmt.Errorf("no op %q", a.Op)
	}
	if err != nil && a.Fail {
		return nil, fmt.Errorf("term %s: %w", a.Op, err)
	}
	if a.Hold && err == nil {
		<-ctx.Done()
		return nil, fmt.Errorf("term %s, held: %w", a.Op, ctx.Err())
	}
	if err != nil {
		kind := "other"
		for _, k := range kinds {
			if errors.Is(err, k) {
				kind = k.Error()
				break
			}
		}
		b, _ := json.Marshal(map[string]string{"error": kind, "message": err.Error()})
		return &tools.CallResult{Text: err.Error(), Structured: b, IsError: true}, nil
	}
	b, err := protojson.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return &tools.CallResult{Text: string(b), Structured: b}, nil
}

func main() { sdk.Serve(&termdrive{}) }
