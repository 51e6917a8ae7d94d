//go:build consolehost

package main

import (
	"context"
	"sort"
	"sync"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/console"
	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/host/mcpserver"
)

// hostSource is the console's view of the host and its MCP server: it
// converts their types to the console's JSON ones.
type hostSource struct {
	h    *host.Host
	m    *mcpserver.Server
	ring *hostlog.Ring
	file string
}

func newConsoleSource(h *host.Host, m *mcpserver.Server, file string) console.Source {
	return &hostSource{h: h, m: m, ring: h.LogRing(), file: file}
}

func (s *hostSource) Version() string { return buildVersion() }
func (s *hostSource) File() string    { return s.file }

func (s *hostSource) Graph() []console.EntryView {
	g := s.h.Graph()
	out := make([]console.EntryView, 0, len(g))
	for _, e := range g {
		v := console.EntryView{
			ID: e.ID, Name: e.Name, Binary: e.Binary, SHA256: e.SHA256, Disabled: e.Disabled,
			State: e.State, Reason: e.Reason, Pid: e.Pid, Restarts: e.Restarts,
			UptimeMs: e.Uptime.Milliseconds(), Version: e.Version, Provides: e.Provides, Tools: e.Tools,
			File: e.File, Line: e.Line, Consumes: make([]console.Dep, 0, len(e.Consumes)),
		}
		for _, d := range e.Consumes {
			v.Consumes = append(v.Consumes, console.Dep{Key: d.Key, Optional: d.Optional})
		}
		if e.LastError != nil {
			v.LastError = &console.PosError{Message: e.LastError.Message, File: e.LastError.File, Line: e.LastError.Line}
		}
		out = append(out, v)
	}
	return out
}

func (s *hostSource) Changes() (<-chan struct{}, func())          { return s.h.Changes() }
func (s *hostSource) Reload(ctx context.Context, id string) error { return s.h.Reload(ctx, id) }

func (s *hostSource) CompositionText() (string, []byte, error) { return s.h.CompositionText() }

func problems(ps []host.Problem) []console.Problem {
	out := make([]console.Problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, console.Problem{File: p.File, Line: p.Line, Col: p.Col, Message: p.Message})
	}
	return out
}

func (s *hostSource) CheckComposition(ctx context.Context, text []byte) []console.Problem {
	return problems(s.h.CheckCompositionText(ctx, text))
}

func (s *hostSource) ApplyComposition(ctx context.Context, text []byte) ([]console.Problem, error) {
	ps, err := s.h.ApplyCompositionText(ctx, text)
	return problems(ps), err
}

func toLogLine(l hostlog.Line) console.LogLine {
	return console.LogLine{Time: l.Time, Level: l.Level, Entry: l.Entry, Message: l.Message, Fields: l.Fields}
}

func (s *hostSource) Logs(entry, level string, n int) []console.LogLine {
	if s.ring == nil {
		return nil
	}
	lines := s.ring.Recent(entry, level, n)
	out := make([]console.LogLine, 0, len(lines))
	for _, l := range lines {
		out = append(out, toLogLine(l))
	}
	return out
}

// SubscribeLogs converts the ring's lines until stop.
func (s *hostSource) SubscribeLogs() (<-chan console.LogLine, func()) {
	if s.ring == nil {
		return nil, func() {}
	}
	in, stopRing := s.ring.Subscribe()
	out := make(chan console.LogLine, 64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		for {
			select {
			case <-done:
				return
			case l, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- toLogLine(l):
				case <-done:
					return
				}
			}
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			close(done)
			stopRing()
			wg.Wait()
		})
	}
}

func (s *hostSource) Approvals() []console.Approval {
	qs := s.h.Questions()
	out := make([]console.Approval, 0, len(qs))
	for _, q := range qs {
		out = append(out, console.Approval{
			ID: q.ID, Owner: q.Owner, Kind: q.Kind, Command: q.Command, Hosts: q.Hosts,
			Justification: q.Justification, AskedAt: q.AskedAt, ExpiresAt: q.ExpiresAt,
		})
	}
	return out
}

func (s *hostSource) ApprovalChanges() (<-chan struct{}, func()) { return s.h.QuestionChanges() }
func (s *hostSource) AnswerApproval(id string, approve bool) error {
	return s.h.AnswerQuestion(id, approve)
}

// Agents groups calls, jobs and terminals under their owners; an owner
// gone from MCP whose jobs still run is listed by its id alone.
func (s *hostSource) Agents() []console.Owner {
	byID := map[string]*console.Owner{}
	var order []string
	owner := func(id string) *console.Owner {
		if o, ok := byID[id]; ok {
			return o
		}
		o := &console.Owner{ID: id}
		byID[id] = o
		order = append(order, id)
		return o
	}
	for _, o := range s.m.Owners() {
		ow := owner(o.ID)
		ow.Client, ow.Since = o.Client, o.Since
	}
	for _, c := range s.m.CallsInFlight() {
		ow := owner(c.Owner)
		ow.Calls = append(ow.Calls, console.CallView{ID: c.ID, Tool: c.Tool, Command: c.Command, StartedAt: c.Started})
	}
	for _, j := range s.h.Jobs() {
		ow := owner(j.Owner)
		ow.Jobs = append(ow.Jobs, jobView(j))
	}
	for _, t := range s.h.Terminals() {
		ow := owner(t.Owner)
		ow.Terminals = append(ow.Terminals, console.TerminalView{ID: t.ID, Command: t.Command, Cols: t.Cols, Rows: t.Rows, Alive: t.Alive})
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := byID[order[i]], byID[order[j]]
		return a.Since.Before(b.Since) || (a.Since.Equal(b.Since) && a.ID < b.ID)
	})
	out := make([]console.Owner, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

func jobView(j host.JobView) console.JobView {
	return console.JobView{ID: j.ID, Command: j.Command, State: j.State, ExitCode: j.ExitCode, StartedAt: j.Started, OutputBytes: j.OutputBytes}
}

// AgentChanges merges the MCP server's changes (calls, owners) with the
// host's (jobs) into one signal.
func (s *hostSource) AgentChanges() (<-chan struct{}, func()) {
	a, stopA := s.m.AgentChanges()
	j, stopJ := s.h.JobChanges()
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for a != nil || j != nil {
			select {
			case <-done:
				return
			case _, ok := <-a:
				if !ok {
					a = nil
					continue
				}
			case _, ok := <-j:
				if !ok {
					j = nil
					continue
				}
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			close(done)
			stopA()
			stopJ()
			wg.Wait()
		})
	}
}

func (s *hostSource) CancelCall(id string) bool { return s.m.CancelCall(id) }
func (s *hostSource) KillJob(ctx context.Context, owner, id string) error {
	return s.h.KillJob(ctx, owner, id)
}

func (s *hostSource) WatchJobOutput(ctx context.Context, owner, id string, out func([]byte)) (console.JobView, error) {
	j, err := s.h.WatchJobOutput(ctx, owner, id, out)
	return jobView(j), err
}

func (s *hostSource) WatchTerminal(ctx context.Context, owner, id string, out func([]byte)) error {
	return s.h.WatchTerminal(ctx, owner, id, out)
}

func (s *hostSource) WriteTerminal(ctx context.Context, owner, id string, data []byte) error {
	return s.h.WriteTerminal(ctx, owner, id, data)
}
