//go:build !consolehost

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/console"
	"github.com/dshrun/dsh/host/mcpserver"
)

// interimSource shows the console what the host offers today: every
// entry's status (changes found by a look each second while a page is
// open), reloads and the composition's text. consolesource.go (build tag
// consolehost) replaces it once the host gives the console the rest.
type interimSource struct {
	h    *host.Host
	file string
}

func newConsoleSource(h *host.Host, _ *mcpserver.Server, file string) console.Source {
	return &interimSource{h: h, file: file}
}

var errNotYet = errors.New("this build of dsh cannot do that from the console yet")

func (s *interimSource) Version() string { return buildVersion() }
func (s *interimSource) File() string    { return s.file }

func (s *interimSource) Graph() []console.EntryView {
	st := s.h.Status()
	out := make([]console.EntryView, 0, len(st))
	for _, e := range st {
		out = append(out, entryView(e))
	}
	return out
}

func entryView(e host.EntryStatus) console.EntryView {
	return console.EntryView{
		ID: e.ID, Name: e.Name, Binary: e.Binary, Disabled: e.Disabled, State: e.State, Reason: e.Reason,
		Pid: e.Pid, Restarts: e.Restarts, UptimeMs: e.Uptime.Milliseconds(), Version: e.Version,
		Provides: e.Provides, Tools: e.Tools,
	}
}

func (s *interimSource) Changes() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := withoutUptime(s.h.Status())
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if now := withoutUptime(s.h.Status()); !reflect.DeepEqual(now, last) {
				last = now
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	return ch, func() { close(done) }
}

func withoutUptime(st []host.EntryStatus) []host.EntryStatus {
	for i := range st {
		st[i].Uptime = 0
	}
	return st
}

func (s *interimSource) Reload(ctx context.Context, id string) error { return s.h.Reload(ctx, id) }

func (s *interimSource) CompositionText() (string, []byte, error) {
	b, err := os.ReadFile(s.file)
	if err != nil {
		return s.file, nil, fmt.Errorf("cannot read the composition: %w", err)
	}
	return s.file, b, nil
}

func (s *interimSource) CheckComposition(context.Context, []byte) []console.Problem {
	return []console.Problem{{File: s.file, Message: errNotYet.Error()}}
}

func (s *interimSource) ApplyComposition(context.Context, []byte) ([]console.Problem, error) {
	return nil, errNotYet
}

func (s *interimSource) Logs(string, string, int) []console.LogLine { return nil }
func (s *interimSource) SubscribeLogs() (<-chan console.LogLine, func()) {
	return nil, func() {}
}
func (s *interimSource) Approvals() []console.Approval { return nil }
func (s *interimSource) ApprovalChanges() (<-chan struct{}, func()) {
	return nil, func() {}
}
func (s *interimSource) AnswerApproval(string, bool) error { return errNotYet }
func (s *interimSource) Agents() []console.Owner           { return nil }
func (s *interimSource) AgentChanges() (<-chan struct{}, func()) {
	return nil, func() {}
}
func (s *interimSource) CancelCall(string) bool { return false }
func (s *interimSource) KillJob(context.Context, string, string) error {
	return errNotYet
}
func (s *interimSource) WatchJobOutput(context.Context, string, string, func([]byte)) (console.JobView, error) {
	return console.JobView{}, errNotYet
}
func (s *interimSource) WatchTerminal(context.Context, string, string, func([]byte)) error {
	return errNotYet
}
func (s *interimSource) WriteTerminal(context.Context, string, string, []byte) error {
	return errNotYet
}
