package subprocess

import (
	"context"
	"time"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// terminals is the implementation's terminal half, or an error saying it
// has none (an implementation need not hold terminals).
func (s *Server) terminals() (Terminals, error) {
	t, ok := s.impl.(Terminals)
	if !ok {
		return nil, seam.ToStatus(seam.New(sdk.ErrUnimplemented, "this ctx.subprocess holds no terminals"), kinds...)
	}
	return t, nil
}

func (s *Server) SpawnTerminal(ctx context.Context, req *TerminalRequest) (*Started, error) {
	t, err := s.terminals()
	if err != nil {
		return nil, err
	}
	r, err := t.SpawnTerminal(ctx, req)
	return r, seam.ToStatus(err, kinds...)
}

func (s *Server) WriteTerminal(ctx context.Context, in *subprocessv1.TerminalInput) (*subprocessv1.TerminalWritten, error) {
	t, err := s.terminals()
	if err != nil {
		return nil, err
	}
	written, err := t.WriteTerminal(ctx, in.Id, in.Data)
	if err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &subprocessv1.TerminalWritten{Written: written}, nil
}

func (s *Server) ReadTerminal(ctx context.Context, req *subprocessv1.TerminalReadRequest) (*TerminalOutput, error) {
	t, err := s.terminals()
	if err != nil {
		return nil, err
	}
	r, err := t.ReadTerminal(ctx, req.Id, time.Duration(min(max(req.WaitMs, 0), 1<<40))*time.Millisecond)
	return r, seam.ToStatus(err, kinds...)
}

func (s *Server) ResizeTerminal(ctx context.Context, req *subprocessv1.TerminalSize) (*subprocessv1.TerminalResized, error) {
	t, err := s.terminals()
	if err != nil {
		return nil, err
	}
	if err := t.ResizeTerminal(ctx, req.Id, int(req.Cols), int(req.Rows)); err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &subprocessv1.TerminalResized{}, nil
}

func (s *Server) SignalTerminal(ctx context.Context, req *subprocessv1.TerminalSignal) (*TerminalSignalled, error) {
	t, err := s.terminals()
	if err != nil {
		return nil, err
	}
	r, err := t.SignalTerminal(ctx, req.Id, req.Signal, req.Target)
	return r, seam.ToStatus(err, kinds...)
}
