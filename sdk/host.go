package sdk

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
)

// Host is a plugin's handle on the dsh host, valid from Apply until the
// plugin is disposed. It is safe for concurrent use.
type Host struct {
	id         string
	runtimeDir string
	conn       *grpc.ClientConn
	client     pluginv1.HostClient
	logger     hclog.Logger
}

// ID is the composition entry id of this plugin.
func (h *Host) ID() string { return h.id }

// Logger logs through the host: lines reach the host's log tagged with the
// plugin, at the host's level.
func (h *Host) Logger() hclog.Logger { return h.logger }

// RuntimeDir is a private directory for this plugin inside the host's runtime
// directory (mode 0700). It is removed when the host stops.
func (h *Host) RuntimeDir() string { return h.runtimeDir }

// Conn returns a connection to whichever plugin currently provides key. Use
// it with the key's generated gRPC client:
//
//	env := shellenvv1.NewShellEnvClient(host.Conn("shellEnv"))
//
// Calls fail with codes.PermissionDenied when key is not in the plugin's
// Inject list and codes.Unavailable when nobody provides it. Their errors
// come as the vocabulary's (FromRPC): the code and details stay, and the
// text is the other side's message, so a plugin that wraps one passes on
// no transport words.
func (h *Host) Conn(key string) grpc.ClientConnInterface {
	return keyedConn{conn: h.conn, key: key}
}

// Service is what Lookup reports about a key.
type Service struct {
	Provided bool
	Provider string            // entry id of the provider
	Facts    map[string]string // capability facts, e.g. sandboxMode
	// Services are the gRPC services the provider serves for the key, e.g.
	// "dsh.shellenv.v1.ShellEnv": a consumer of a seam with several
	// versions picks the newest it knows among them.
	Services []string
}

// Lookup tells whether key is provided now, by whom, with which facts.
func (h *Host) Lookup(ctx context.Context, key string) (Service, error) {
	resp, err := h.client.Lookup(ctx, &pluginv1.LookupRequest{Key: key})
	if err != nil {
		return Service{}, fmt.Errorf("lookup %q: %w", key, FromRPC(err))
	}
	return Service{Provided: resp.Provided, Provider: resp.Provider, Facts: resp.Facts, Services: resp.GrpcServices}, nil
}

// keyedConn tags every call with the service key it is meant for, so the
// host routes it without guessing from the gRPC service name.
type keyedConn struct {
	conn *grpc.ClientConn
	key  string
}

func (c keyedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return FromRPC(c.conn.Invoke(c.outgoing(ctx), method, args, reply, opts...))
}

func (c keyedConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := c.conn.NewStream(c.outgoing(ctx), desc, method, opts...)
	if err != nil {
		return nil, FromRPC(err)
	}
	return vocabStream{s}, nil
}

// vocabStream is a stream whose errors are the vocabulary's; io.EOF, the
// end of a stream, stays itself.
type vocabStream struct{ grpc.ClientStream }

func (s vocabStream) SendMsg(m any) error { return FromRPC(s.ClientStream.SendMsg(m)) }
func (s vocabStream) RecvMsg(m any) error { return FromRPC(s.ClientStream.RecvMsg(m)) }

// outgoing tags a call with its key and, when it is made while serving a
// request, with the tool call that request serves.
func (c keyedConn) outgoing(ctx context.Context) context.Context {
	kv := []string{MetaKey, c.key}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MetaCall); len(v) > 0 {
			kv = append(kv, MetaCall, v[0])
		}
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}
