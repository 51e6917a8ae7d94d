package sandbox

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/sandbox/sandboxv1"
	"github.com/dshrun/dsh/internal/seam"
)

// kinds are the seam's own errors and the codes they travel as.
var (
	kinds       = []seam.Kind{{Err: ErrNoPolicy, Code: codes.FailedPrecondition}}
	runnerKinds = []seam.Kind{{Err: ErrUnavailable, Code: codes.FailedPrecondition}}
)

// Client is a plugin's view of ctx.sandboxPolicy over gRPC.
type Client struct {
	c sandboxv1.SandboxPolicyClient
}

var _ Policies = (*Client)(nil)

// NewClient wraps a connection to ctx.sandboxPolicy.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: sandboxv1.NewSandboxPolicyClient(conn)}
}

func (c *Client) Get(ctx context.Context) (*Policy, error) {
	p, err := c.c.Get(ctx, &sandboxv1.GetPolicyRequest{})
	if err != nil {
		return nil, seam.CallError("sandbox policy", err, kinds...)
	}
	return p, nil
}

// RunnerClient is a plugin's view of ctx.sandbox over gRPC.
type RunnerClient struct {
	c sandboxv1.SandboxClient
}

var _ Sandboxes = (*RunnerClient)(nil)

// NewRunnerClient wraps a connection to ctx.sandbox.
func NewRunnerClient(conn grpc.ClientConnInterface) *RunnerClient {
	return &RunnerClient{c: sandboxv1.NewSandboxClient(conn)}
}

func (c *RunnerClient) Wrap(ctx context.Context, req *WrapRequest) (*Wrapped, error) {
	w, err := c.c.Wrap(ctx, req)
	if err != nil {
		return nil, seam.CallError("sandbox", err, runnerKinds...)
	}
	return w, nil
}

func (c *RunnerClient) Settle(ctx context.Context, req *SettleRequest) (*Settled, error) {
	st, err := c.c.Settle(ctx, req)
	if err != nil {
		return nil, seam.CallError("sandbox", err, runnerKinds...)
	}
	return st, nil
}
