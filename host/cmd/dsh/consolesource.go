package main

import (
	"context"
	"errors"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/console"
	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/host/jobtable"
	"github.com/dshrun/dsh/host/mcpserver"
	"github.com/dshrun/dsh/internal/notify"
)

// hostSource is the console's view of the host and its MCP server: the
// host's own types turned into the API's.
type hostSource struct {
	h    *host.Host
	m    *mcpserver.Server
	file string
}

func newConsoleSource(h *host.Host, m *mcpserver.Server, file string) console.Source {
	return &hostSource{h: h, m: m, file: file}
}

// notFound is err as the console's ErrNotFound (the API's 404), keeping
// the host's sentence.
type notFound struct{ err error }

func (e notFound) Error() string        { return e.err.Error() }
func (e notFound) Unwrap() error        { return e.err }
func (e notFound) Is(target error) bool { return target == console.ErrNotFound }

func lookup(err error) error {
	if err != nil && (errors.Is(err, host.ErrUnknownEntry) || errors.Is(err, host.ErrNoQuestion) ||
		errors.Is(err, jobtable.ErrNotFound) || errors.Is(err, terminals.ErrNoSession)) {
		return notFound{err}
	}
	return err
}

func (s *hostSource) Version() string { return buildVersion() }
func (s *hostSource) File() string    { return s.file }

func (s *hostSource) Graph() []host.EntryView { return s.h.Graph() }

func (s *hostSource) Changes() (<-chan struct{}, func()) { return s.h.Changes() }

func (s *hostSource) Reload(ctx context.Context, id string) error { return lookup(s.h.Reload(ctx, id)) }

func (s *hostSource) CompositionText() (string, []byte, error) { return s.h.CompositionText() }

func (s *hostSource) CheckComposition(ctx context.Context, text []byte) []console.Problem {
	return problems(s.h.CheckCompositionText(ctx, text))
}

func (s *hostSource) ApplyComposition(ctx context.Context, text []byte) ([]console.Problem, error) {
	p, err := s.h.ApplyCompositionText(ctx, text)
	return problems(p), err
}

func problems(ps []host.Problem) []console.Problem {
	out := make([]console.Problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, console.Problem{File: p.File, Line: p.Line, Col: p.Col, Message: p.Message})
	}
	return out
}

// Logs: the page's "" is every entry; the host's own lines have entry "".
func (s *hostSource) Logs(entry, level string, n int) []hostlog.Line {
	r := s.h.LogRing()
	if r == nil {
		return nil
	}
	if entry == "" {
		entry = hostlog.AllEntries
	}
	return r.Recent(entry, level, n)
}

func (s *hostSource) SubscribeLogs() (<-chan hostlog.Line, func()) {
	if r := s.h.LogRing(); r != nil {
		return r.Subscribe()
	}
	return nil, func() {}
}

func (s *hostSource) Approvals() []host.Question { return s.h.Questions() }

func (s *hostSource) ApprovalChanges() (<-chan struct{}, func()) { return s.h.QuestionChanges() }

func (s *hostSource) AnswerApproval(id string, approve bool) error {
	return lookup(s.h.AnswerQuestion(id, approve))
}

// Agents is every owner the MCP server knows, and any other owner that
// holds jobs or terminals (a session gone within its release grace).
func (s *hostSource) Agents() []console.Owner {
	now := time.Now()
	var order []string
	byID := map[string]*console.Owner{}
	get := func(id string) *console.Owner {
		o, ok := byID[id]
		if !ok {
			o = &console.Owner{ID: id, Calls: []console.CallView{}, Jobs: []console.JobView{}, Terminals: []console.TerminalView{}}
			byID[id] = o
			order = append(order, id)
		}
		return o
	}
	for _, v := range s.m.Owners() {
		o := get(v.ID)
		o.Client, o.Since = v.Client, v.Since
	}
	for _, c := range s.m.CallsInFlight() {
		o := get(c.Owner)
		o.Calls = append(o.Calls, console.CallView{ID: c.ID, Tool: c.Tool, Command: c.Command, StartedAt: c.Started, ElapsedMs: now.Sub(c.Started).Milliseconds()})
	}
	for _, j := range s.h.Jobs() {
		get(j.Owner).Jobs = append(get(j.Owner).Jobs, jobView(j))
	}
	for _, t := range s.h.Terminals() {
		get(t.Owner).Terminals = append(get(t.Owner).Terminals, console.TerminalView{ID: t.ID, Command: t.Command, Cols: t.Cols, Rows: t.Rows, Alive: t.Alive})
	}
	out := make([]console.Owner, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

func jobView(j host.JobView) console.JobView {
	return console.JobView{ID: j.ID, Command: j.Command, State: j.State, ExitCode: j.ExitCode, StartedAt: j.Started, OutputBytes: j.OutputBytes}
}

// AgentChanges joins the MCP server's changes (sessions, calls) with the
// host's (jobs, terminals).
func (s *hostSource) AgentChanges() (<-chan struct{}, func()) {
	return notify.Join(s.m.AgentChanges, s.h.JobChanges)
}

func (s *hostSource) CancelCall(id string) bool { return s.m.CancelCall(id) }

func (s *hostSource) KillJob(ctx context.Context, owner, id string) error {
	return lookup(s.h.KillJob(ctx, owner, id))
}

func (s *hostSource) WatchJobOutput(ctx context.Context, owner, id string, out func([]byte)) (console.JobView, error) {
	j, err := s.h.WatchJobOutput(ctx, owner, id, out)
	return jobView(j), lookup(err)
}

func (s *hostSource) WatchTerminal(ctx context.Context, owner, id string, out func([]byte)) error {
	return lookup(s.h.WatchTerminal(ctx, owner, id, out))
}

func (s *hostSource) WriteTerminal(ctx context.Context, owner, id string, data []byte) error {
	return lookup(s.h.WriteTerminal(ctx, owner, id, data))
}
