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

func (c *Client) Intercept(ctx context.Context, in *Interception) error {
	_, err := c.c.Intercept(ctx, in)
	return seam.CallError("intercept tool calls", err, kinds...)
}

// InterceptorClient calls the interceptor of the plugin at the other end
// of a connection.
type InterceptorClient struct {
	c toolsv1.ToolInterceptorClient
}

var _ Interceptor = (*InterceptorClient)(nil)

// NewInterceptorClient wraps a connection to a plugin that intercepts.
func NewInterceptorClient(conn grpc.ClientConnInterface) *InterceptorClient {
	return &InterceptorClient{c: toolsv1.NewToolInterceptorClient(conn)}
}

// Before and After's errors are the sdk vocabulary's, as they came.
func (c *InterceptorClient) Before(ctx context.Context, req *BeforeCall) (*BeforeDecision, error) {
	r, err := c.c.Before(ctx, req)
	if err != nil {
		return nil, sdk.FromRPC(err)
	}
	return r, nil
}

func (c *InterceptorClient) After(ctx context.Context, req *AfterCall) (*AfterFeedback, error) {
	r, err := c.c.After(ctx, req)
	if err != nil {
		return nil, sdk.FromRPC(err)
	}
	return r, nil
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
