package termbackend

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/plugins/termbackend/terminalv1"
)

// kinds are the seam's own errors and the codes they travel as.
var kinds = []seam.Kind{
	{Err: ErrCannotStart, Code: codes.FailedPrecondition},
	{Err: ErrNotFound, Code: codes.NotFound},
}

// Client is the host's view of one backend over gRPC.
type Client struct {
	c terminalv1.BackendClient
}

var _ Backend = (*Client)(nil)

// NewClient wraps a connection to a backend plugin.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: terminalv1.NewBackendClient(conn)}
}

func (c *Client) Start(ctx context.Context, req *StartRequest) (*Started, error) {
	s, err := c.c.Start(ctx, req)
	if err != nil {
		return nil, seam.CallError("start a terminal session", err, kinds...)
	}
	return s, nil
}

func (c *Client) Send(ctx context.Context, req *SendRequest) (bool, error) {
	r, err := c.c.Send(ctx, req)
	if err != nil {
		return false, seam.CallError("send to terminal "+req.ProcessId, err, kinds...)
	}
	return r.Written, nil
}
