package hub

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/dshrun/dsh/sdk"
)

// HostOwner is the owner the host's own calls act for.
const HostOwner = "host"

// Conn lets the host itself (front ends, tests, benchmarks) call the
// current provider of a key.
type Conn struct {
	Router Router
	Key    string
	// Owner is whom each call acts for: it gets a call id of Owner's that
	// reaches the provider, so what the provider does for it through the
	// host is Owner's. The host's own calls act for HostOwner: their
	// processes are the host's, not the provider's, so they outlive its
	// reloads.
	Owner string
	// Uncounted, if set, is a method whose calls a reload does not wait
	// for.
	Uncounted string
}

// provider finds the key's provider process, waiting while it restarts.
func (c *Conn) provider(ctx context.Context) (Provider, error) {
	ep, ok := c.Router.Endpoint(c.Key)
	if !ok {
		return nil, sdk.HostError(codes.Unavailable, sdk.ReasonNotProvided, fmt.Sprintf("no provider of %q is active", c.Key))
	}
	p, err := ep.Get(ctx, c.Router.RestartWait())
	if err != nil {
		return nil, sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, err.Error())
	}
	return p, nil
}

func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	p, err := c.provider(ctx)
	if err != nil {
		return err
	}
	id, end := c.Router.Begin(c.Owner, p.ID())
	defer end()
	ctx = metadata.AppendToOutgoingContext(ctx, sdk.MetaCaller, "host", sdk.MetaCall, id)
	if method != c.Uncounted {
		p.Begin()
		defer p.End()
	}
	if err := p.Conn().Invoke(ctx, method, args, reply, opts...); err != nil {
		return Gone(ctx, p, err, c.Router.CallTimeout())
	}
	return nil
}

func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	// A stream (a watch) acts for nobody: it gets no call id.
	p, err := c.provider(ctx)
	if err != nil {
		return nil, err
	}
	return p.Conn().NewStream(metadata.AppendToOutgoingContext(ctx, sdk.MetaCaller, "host"), desc, method, opts...)
}
