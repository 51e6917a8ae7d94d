package subprocess

import (
	"context"
	"time"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
)

func (c *Client) SpawnTerminal(ctx context.Context, req *TerminalRequest) (*Started, error) {
	r, err := c.c.SpawnTerminal(ctx, req)
	if err != nil {
		return nil, seam.CallError("subprocess spawn terminal", err, kinds...)
	}
	return r, nil
}

func (c *Client) WriteTerminal(ctx context.Context, id string, data []byte) (bool, error) {
	r, err := c.c.WriteTerminal(ctx, &subprocessv1.TerminalInput{Id: id, Data: data})
	if err != nil {
		return false, seam.CallError("subprocess write terminal "+id, err, kinds...)
	}
	return r.Written, nil
}

func (c *Client) ReadTerminal(ctx context.Context, id string, wait time.Duration) (*TerminalOutput, error) {
	r, err := c.c.ReadTerminal(ctx, &subprocessv1.TerminalReadRequest{Id: id, WaitMs: wait.Milliseconds()})
	if err != nil {
		return nil, seam.CallError("subprocess read terminal "+id, err, kinds...)
	}
	return r, nil
}

func (c *Client) ResizeTerminal(ctx context.Context, id string, cols, rows int) error {
	_, err := c.c.ResizeTerminal(ctx, &subprocessv1.TerminalSize{Id: id, Cols: uint32(max(cols, 0)), Rows: uint32(max(rows, 0))})
	return seam.CallError("subprocess resize terminal "+id, err, kinds...)
}

func (c *Client) SignalTerminal(ctx context.Context, id, signal string, target TerminalTarget) (*TerminalSignalled, error) {
	r, err := c.c.SignalTerminal(ctx, &subprocessv1.TerminalSignal{Id: id, Signal: signal, Target: target})
	if err != nil {
		return nil, seam.CallError("subprocess signal terminal "+id, err, kinds...)
	}
	return r, nil
}
