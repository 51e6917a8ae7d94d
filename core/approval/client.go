package approval

import (
	"context"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/approval/approvalv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Client is a plugin's view of ctx.approval over gRPC.
type Client struct {
	c approvalv1.ApprovalClient
}

var _ Approver = (*Client)(nil)

// NewClient wraps a connection to ctx.approval.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: approvalv1.NewApprovalClient(conn)}
}

func (c *Client) Approve(ctx context.Context, req *Request) (*Decision, error) {
	d, err := c.c.Approve(ctx, req)
	if err != nil {
		return nil, seam.CallError("approval", err)
	}
	return d, nil
}
