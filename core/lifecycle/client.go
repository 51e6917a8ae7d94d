package lifecycle

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
	"github.com/dshrun/dsh/sdk"
)

// Client calls the Lifecycle service of the plugin at the other end of a
// connection. Its errors are the sdk vocabulary's, as they came (sdk.FromRPC):
// the caller names the plugin and what it asked of it.
type Client struct {
	c pluginv1.LifecycleClient
}

// NewClient wraps a connection to a plugin's own server.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: pluginv1.NewLifecycleClient(conn)}
}

// Describe asks what the plugin is; it has no effect on the plugin.
func (c *Client) Describe(ctx context.Context) (*Description, error) {
	d, err := c.c.Describe(ctx, &pluginv1.DescribeRequest{})
	if err != nil {
		return nil, sdk.FromRPC(err)
	}
	return d, nil
}

// Apply configures the plugin and gives it the broker id of its host
// server; it answers the capability facts of what the plugin provides.
func (c *Client) Apply(ctx context.Context, req *ApplyRequest) (*ApplyResponse, error) {
	r, err := c.c.Apply(ctx, req)
	if err != nil {
		return nil, sdk.FromRPC(err)
	}
	return r, nil
}

// Check asks what Apply would refuse of req's config, acting on nothing.
// A plugin that does not implement it has nothing to check beyond its
// config schema: nil.
func (c *Client) Check(ctx context.Context, req *CheckRequest) error {
	_, err := c.c.Check(ctx, req)
	if err == nil || status.Code(err) == codes.Unimplemented {
		return nil
	}
	return sdk.FromRPC(err)
}

// Dispose releases what Apply built; the process is stopped afterwards.
func (c *Client) Dispose(ctx context.Context) error {
	_, err := c.c.Dispose(ctx, &pluginv1.DisposeRequest{})
	return sdk.FromRPC(err)
}

// Health asks whether the plugin is well; an answer at all says it is
// alive.
func (c *Client) Health(ctx context.Context) (*HealthResponse, error) {
	r, err := c.c.Health(ctx, &pluginv1.HealthRequest{})
	if err != nil {
		return nil, sdk.FromRPC(err)
	}
	return r, nil
}

// Release tells a provider that caller (an entry id) went away, so it
// drops what that caller registered with it.
func (c *Client) Release(ctx context.Context, caller string) error {
	_, err := c.c.Release(ctx, &pluginv1.ReleaseRequest{Caller: caller})
	return sdk.FromRPC(err)
}
