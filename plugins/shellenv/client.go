package shellenv

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
)

// kinds are the seam's own errors and the codes they travel as.
var kinds = []seam.Kind{{Err: ErrRefused, Code: codes.InvalidArgument}}

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
		return Snapshot{}, seam.CallError("shellEnv collect", err, kinds...)
	}
	return snapshotOf(resp), nil
}

func (c *Client) Register(ctx context.Context, name, value string) error {
	_, err := c.c.Register(ctx, &shellenvv1.RegisterRequest{Name: name, Value: value})
	return seam.CallError("shellEnv register "+name, err, kinds...)
}

func (c *Client) Unregister(ctx context.Context, name string) error {
	_, err := c.c.Unregister(ctx, &shellenvv1.UnregisterRequest{Name: name})
	return seam.CallError("shellEnv unregister "+name, err, kinds...)
}

func (c *Client) List(ctx context.Context) ([]Fact, error) {
	resp, err := c.c.List(ctx, &shellenvv1.ListRequest{})
	if err != nil {
		return nil, seam.CallError("shellEnv list", err, kinds...)
	}
	out := make([]Fact, 0, len(resp.Facts))
	for _, f := range resp.Facts {
		out = append(out, Fact{Name: f.Name, Value: f.Value, Owner: f.Owner})
	}
	return out, nil
}

func (c *Client) Watch(ctx context.Context, send func(Snapshot) error) error {
	// Ends the stream whichever way Watch returns.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.c.Watch(sctx, &shellenvv1.WatchRequest{})
	for err == nil {
		var snap *shellenvv1.Snapshot
		if snap, err = stream.Recv(); err == nil {
			if err := send(snapshotOf(snap)); err != nil {
				return err
			}
		}
	}
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil // the provider or the caller ended it
	}
	return seam.CallError("shellEnv watch", err, kinds...)
}

func snapshotOf(s *shellenvv1.Snapshot) Snapshot {
	return Snapshot{Env: s.Env, Generation: s.Generation}
}

func snapshotProto(s Snapshot) *shellenvv1.Snapshot {
	return &shellenvv1.Snapshot{Env: s.Env, Generation: s.Generation}
}
