package shellenv

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
)

// Client is the Env of a provider reached over gRPC (usually through
// sdk.Host.Conn(shellenv.Key)).
type Client struct {
	c shellenvv1.ShellEnvClient
}

var _ Env = (*Client)(nil)

// NewClient wraps a connection to ctx.shellEnv.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: shellenvv1.NewShellEnvClient(conn)}
}

func (c *Client) Collect(ctx context.Context) (Snapshot, error) {
	resp, err := c.c.Collect(ctx, &shellenvv1.CollectRequest{})
	if err != nil {
		return Snapshot{}, fmt.Errorf("shellEnv collect: %w", err)
	}
	return Snapshot{Env: resp.Env, Generation: resp.Generation}, nil
}

func (c *Client) Register(ctx context.Context, name, value string) error {
	if _, err := c.c.Register(ctx, &shellenvv1.RegisterRequest{Name: name, Value: value}); err != nil {
		return fmt.Errorf("shellEnv register %s: %w", name, err)
	}
	return nil
}

func (c *Client) Unregister(ctx context.Context, name string) error {
	if _, err := c.c.Unregister(ctx, &shellenvv1.UnregisterRequest{Name: name}); err != nil {
		return fmt.Errorf("shellEnv unregister %s: %w", name, err)
	}
	return nil
}

func (c *Client) List(ctx context.Context) ([]Fact, error) {
	resp, err := c.c.List(ctx, &shellenvv1.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("shellEnv list: %w", err)
	}
	out := make([]Fact, 0, len(resp.Facts))
	for _, f := range resp.Facts {
		out = append(out, Fact{Name: f.Name, Value: f.Value, Owner: f.Owner})
	}
	return out, nil
}
