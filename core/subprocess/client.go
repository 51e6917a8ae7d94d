package subprocess

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
)

// kinds are the seam's own errors and the codes they travel as.
var kinds = []seam.Kind{
	{Err: ErrCannotStart, Code: codes.FailedPrecondition},
	{Err: ErrNotFound, Code: codes.NotFound},
	{Err: ErrSandboxUnavailable, Code: codes.Aborted},
	{Err: ErrInvalid, Code: codes.InvalidArgument},
}

// Client is a plugin's view of ctx.subprocess over gRPC.
type Client struct {
	c subprocessv1.SubprocessClient
}

var (
	_ Processes = (*Client)(nil)
	_ Terminals = (*Client)(nil)
)

// NewClient wraps a connection to ctx.subprocess.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: subprocessv1.NewSubprocessClient(conn)}
}

func (c *Client) Run(ctx context.Context, req *SpawnRequest) (*Result, error) {
	r, err := c.c.Run(ctx, req)
	if err != nil {
		return nil, seam.CallError("subprocess run", err, kinds...)
	}
	return r, nil
}

func (c *Client) Start(ctx context.Context, req *SpawnRequest) (*Started, error) {
	r, err := c.c.Start(ctx, req)
	if err != nil {
		return nil, seam.CallError("subprocess start", err, kinds...)
	}
	return r, nil
}

func (c *Client) Read(ctx context.Context, id string) (*ReadResult, error) {
	r, err := c.c.Read(ctx, &subprocessv1.ProcessRef{Id: id})
	if err != nil {
		return nil, seam.CallError("subprocess read "+id, err, kinds...)
	}
	return r, nil
}

func (c *Client) Kill(ctx context.Context, id string) (bool, error) {
	r, err := c.c.Kill(ctx, &subprocessv1.ProcessRef{Id: id})
	if err != nil {
		return false, seam.CallError("subprocess kill "+id, err, kinds...)
	}
	return r.Killed, nil
}

func (c *Client) Wait(ctx context.Context, id string) (*Result, error) {
	r, err := c.c.Wait(ctx, &subprocessv1.ProcessRef{Id: id})
	if err != nil {
		return nil, seam.CallError("subprocess wait "+id, err, kinds...)
	}
	return r, nil
}
