package procs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

var _ subprocess.Terminals = (*Service)(nil)

func (s *Service) SpawnTerminal(ctx context.Context, req *subprocess.TerminalRequest) (*subprocess.Started, error) {
	if _, _, err := terminalSize(int(min(req.Cols, 1<<20)), int(min(req.Rows, 1<<20))); err != nil {
		return nil, subprocess.Invalid(err.Error())
	}
	owner, call := s.served(ctx)
	spec := TerminalSpec{
		Argv:           req.Argv,
		Dir:            req.Dir,
		Env:            req.Env,
		Owner:          owner,
		Call:           call,
		Cols:           int(req.Cols),
		Rows:           int(req.Rows),
		MaxBufferBytes: int(min(max(req.MaxBufferBytes, 0), 1<<30)),
	}
	if req.Confinement != "" {
		confine, err := s.confinement(req.Confinement)
		if err != nil {
			return nil, err
		}
		spec.Confine = confine
		spec.Env = s.confinedEnv(req.Confinement, spec.Env)
	}
	t, err := s.M.SpawnTerminal(spec)
	if err != nil {
		return nil, spawnError(err)
	}
	return &subprocess.Started{Id: t.ID(), Pid: int32(t.Pid())}, nil
}

// terminal is the caller's terminal id.
func (s *Service) terminal(ctx context.Context, id string) (*Terminal, error) {
	owner, _ := s.served(ctx)
	return s.ownedTerminal(owner, id)
}

// ownedTerminal is owner's terminal id.
func (s *Service) ownedTerminal(owner, id string) (*Terminal, error) {
	if _, err := s.getOwned(owner, id); err != nil {
		return nil, err
	}
	t, err := s.M.Terminal("", id)
	if err != nil {
		return nil, subprocess.Invalid(err.Error())
	}
	return t, nil
}

func (s *Service) WriteTerminal(ctx context.Context, id string, data []byte) (bool, error) {
	owner, call := s.served(ctx)
	t, err := s.ownedTerminal(owner, id)
	if err != nil {
		return false, err
	}
	return t.WriteFor(ctx, call, data)
}

func (s *Service) ReadTerminal(ctx context.Context, id string, wait time.Duration) (*subprocess.TerminalOutput, error) {
	t, err := s.terminal(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Claimed() {
		// Its holder is its one reader: output read here would be lost
		// to it.
		return nil, seam.New(sdk.ErrPermissionDenied, fmt.Sprintf("terminal %s is a session of ctx.terminals, which alone reads it", id))
	}
	return TerminalOutputProto(t.Read(ctx, wait)), nil
}

func (s *Service) ResizeTerminal(ctx context.Context, id string, cols, rows int) error {
	t, err := s.terminal(ctx, id)
	if err != nil {
		return err
	}
	if _, _, err := terminalSize(cols, rows); err != nil {
		return subprocess.Invalid(err.Error())
	}
	return t.Resize(cols, rows)
}

func (s *Service) SignalTerminal(ctx context.Context, id, signal string, target subprocess.TerminalTarget) (*subprocess.TerminalSignalled, error) {
	t, err := s.terminal(ctx, id)
	if err != nil {
		return nil, err
	}
	sig, err := TerminalSignal(signal)
	if err != nil {
		return nil, subprocess.Invalid(err.Error())
	}
	pid, ok, err := t.Signal(sig, target == subprocess.TargetMain)
	if err != nil {
		return nil, err
	}
	return &subprocess.TerminalSignalled{Signalled: ok, Pid: int32(pid)}, nil
}

// TerminalSignal is the signal a terminal's processes may be sent under
// name ("SIGINT"), or why there is none.
func TerminalSignal(name string) (syscall.Signal, error) {
	if s, ok := terminalSignals[name]; ok {
		return s, nil
	}
	names := make([]string, 0, len(terminalSignals))
	for n := range terminalSignals {
		names = append(names, n)
	}
	slices.Sort(names)
	return 0, fmt.Errorf("unknown signal %q (one of %s)", name, strings.Join(names, ", "))
}

// TerminalOutputProto converts a TerminalRead for the wire.
func TerminalOutputProto(r TerminalRead) *subprocessv1.TerminalOutput {
	out := &subprocessv1.TerminalOutput{
		Data:    r.Data,
		Dropped: r.Dropped,
		Total:   r.Total,
		Status:  statusProto(r.Status),
		Signal:  r.Signal,
	}
	if r.Status == Completed {
		code := int32(r.ExitCode)
		out.ExitCode = &code
	}
	return out
}
