package jobs

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/internal/seam"
)

// kinds are the seam's own errors and the codes they travel as. Another
// owner's job is a refusal like any other: it travels as PERMISSION_DENIED
// and comes back as sdk.ErrPermissionDenied, with its message.
var (
	kinds       = []seam.Kind{{Err: ErrNotFound, Code: codes.NotFound}, {Err: ErrTooMany, Code: codes.ResourceExhausted}}
	serverKinds = append([]seam.Kind{{Err: ErrForeign, Code: codes.PermissionDenied}}, kinds...)
)

// Client is a plugin's view of ctx.jobs over gRPC.
type Client struct {
	c jobsv1.JobsClient
}

var _ Jobs = (*Client)(nil)

// NewClient wraps a connection to ctx.jobs.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: jobsv1.NewJobsClient(conn)}
}

func (c *Client) Register(ctx context.Context, req *RegisterRequest) (*Job, error) {
	j, err := c.c.Register(ctx, req)
	if err != nil {
		return nil, seam.CallError("jobs register", err, kinds...)
	}
	return j, nil
}

func (c *Client) Read(ctx context.Context, id string) (*JobRead, error) {
	r, err := c.c.Read(ctx, &jobsv1.JobRef{Id: id})
	if err != nil {
		return nil, seam.CallError("jobs read "+id, err, kinds...)
	}
	return r, nil
}

func (c *Client) Kill(ctx context.Context, id string) (bool, error) {
	r, err := c.c.Kill(ctx, &jobsv1.JobRef{Id: id})
	if err != nil {
		return false, seam.CallError("jobs kill "+id, err, kinds...)
	}
	return r.Killed, nil
}

func (c *Client) List(ctx context.Context) ([]*Job, error) {
	r, err := c.c.List(ctx, &jobsv1.ListRequest{})
	if err != nil {
		return nil, seam.CallError("jobs list", err, kinds...)
	}
	return r.Jobs, nil
}
