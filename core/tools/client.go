package tools

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// kinds are the seam's own errors and the codes they travel as.
var kinds = []seam.Kind{
	{Err: ErrInvalid, Code: codes.InvalidArgument},
	{Err: ErrTaken, Code: codes.AlreadyExists},
	{Err: ErrNotRegistered, Code: codes.NotFound},
	{Err: ErrCannotRegister, Code: codes.FailedPrecondition},
}

// Client is a plugin's Registrar over gRPC.
type Client struct {
	c toolsv1.ToolsClient
}

var _ Registrar = (*Client)(nil)

// NewClient wraps a connection to ctx.tools.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: toolsv1.NewToolsClient(conn)}
}

func (c *Client) Register(ctx context.Context, spec *ToolSpec) error {
	_, err := c.c.Register(ctx, spec)
	return seam.CallError(fmt.Sprintf("register tool %q", spec.Name), err, kinds...)
}

func (c *Client) Unregister(ctx context.Context, name string) error {
	_, err := c.c.Unregister(ctx, &toolsv1.UnregisterRequest{Name: name})
	return seam.CallError(fmt.Sprintf("unregister tool %q", name), err, kinds...)
}

// HandlerClient calls the tools of the plugin at the other end of a
// connection.
type HandlerClient struct {
	c toolsv1.ToolHandlerClient
}

var _ Handler = (*HandlerClient)(nil)

// NewHandlerClient wraps a connection to a plugin that serves its tools.
func NewHandlerClient(conn grpc.ClientConnInterface) *HandlerClient {
	return &HandlerClient{c: toolsv1.NewToolHandlerClient(conn)}
}

// Call calls one tool. Its errors are the sdk vocabulary's, as they came:
// the caller names the tool, and the host reads its relay's reasons.
func (c *HandlerClient) Call(ctx context.Context, req *CallRequest) (*CallResult, error) {
	r, err := c.c.Call(ctx, req)
	if err != nil {
		return nil, sdk.FromRPC(err)
	}
	return r, nil
}
