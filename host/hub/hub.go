// Package hub is how plugins reach each other: each plugin gets its own
// gRPC server on its go-plugin broker, which forwards every method the
// host does not serve itself to the current provider of the key the
// method belongs to. The caller's identity is fixed by which server the
// call arrived on, so the capability check cannot be talked around.
//
// The hub knows the host only as a Router (which key serves a service,
// its current provider, the call ids it honours, the bounds of a call)
// and each server's Caller; the host registers its own services
// (dsh.plugin.v1.Host, the core services) on the server NewServer makes.
package hub

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/sdk"
)

// Router is what the hub needs of the host.
type Router interface {
	// KeyOf is the key whose provider serves service; "" for none.
	KeyOf(service string) string
	// Endpoint is the current provider of key.
	Endpoint(key string) (Endpoint, bool)
	// Begin registers a call for owner that reaches plugin first; end
	// forgets it.
	Begin(owner, plugin string) (call string, end func())
	// Pass records that call, when it reached from, goes on to plugin to;
	// false (and nothing recorded) when the call did not reach from.
	Pass(call, from, to string) bool
	// CallTimeout bounds every call that is not a known stream. It is
	// read on every call: it must not compute.
	CallTimeout() time.Duration
	// RestartWait bounds how long a call waits for a restarting provider.
	RestartWait() time.Duration
}

// Caller is the plugin on the other end of one server.
type Caller interface {
	// ID is the caller's entry id.
	ID() string
	// Authorize is the capability check: nil when the caller may reach
	// key.
	Authorize(key string) error
	// Touch records that the caller used key, so the provider is told to
	// release the caller's registrations when the caller goes away.
	Touch(key string)
}

// Endpoint is the provider of a key.
type Endpoint interface {
	// ID is the provider's entry id.
	ID() string
	// Serves reports whether the provider serves the gRPC service.
	Serves(service string) bool
	// Kind is the kind of method on this provider.
	Kind(method string) Kind
	// Get is the provider's current process, waiting up to wait while it
	// restarts.
	Get(ctx context.Context, wait time.Duration) (Provider, error)
}

// Provider is one process of a key's provider.
type Provider interface {
	// ID is the provider's entry id.
	ID() string
	Conn() *grpc.ClientConn
	// Begin and End count a call in flight: a reload lets it finish
	// before it stops the process.
	Begin()
	End()
	// Binary is the process's binary, for errors.
	Binary() string
	// Exited is closed once the process has exited; Ended then says how,
	// as the end of a sentence about the plugin ("exited").
	Exited() <-chan struct{}
	Ended() string
}

// NewServer returns the gRPC server plugin c talks to: every method not
// registered on it is forwarded to its provider.
func NewServer(r Router, c Caller, opts ...grpc.ServerOption) *grpc.Server {
	fw := forwarder{r: r, c: c}
	opts = append(opts,
		grpc.ForceServerCodec(proxyCodec{}),
		grpc.UnknownServiceHandler(fw.forward),
	)
	return grpc.NewServer(opts...)
}

// forwarder forwards one server's calls.
type forwarder struct {
	r Router
	c Caller
}

// forward is the handler of every method the host does not serve itself:
// it finds the key, checks the capability and relays the call, streams
// included, to the provider without decoding the messages.
func (fw forwarder) forward(_ any, ss grpc.ServerStream) error {
	r, c := fw.r, fw.c
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "no method in stream")
	}
	service := ServiceOf(method)
	md, _ := metadata.FromIncomingContext(ss.Context())
	key := first(md.Get(sdk.MetaKey))
	if key == "" {
		key = r.KeyOf(service)
		if key == "" {
			return sdk.HostError(codes.Unimplemented, sdk.ReasonUnknownService, fmt.Sprintf("no plugin in this composition serves %s", service))
		}
	}
	if err := c.Authorize(key); err != nil {
		return err
	}
	ep, ok := r.Endpoint(key)
	if !ok {
		return sdk.HostError(codes.Unavailable, sdk.ReasonNotProvided, fmt.Sprintf("no provider of %q is active", key))
	}
	if !ep.Serves(service) {
		return sdk.HostError(codes.Unimplemented, sdk.ReasonUnknownService, fmt.Sprintf("%q is provided by %q, which does not serve %s", key, ep.ID(), service))
	}
	kind := ep.Kind(method)
	ctx := ss.Context()
	if kind != Streaming {
		// Known streams (watches) live as long as their caller wants;
		// every other call has a deadline, so a provider that hangs
		// cannot hold its caller forever.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.CallTimeout())
		defer cancel()
	}
	p, err := ep.Get(ctx, r.RestartWait())
	if err != nil {
		return sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, err.Error())
	}
	c.Touch(key)
	out := metadata.MD{}
	for k, v := range md {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" || k == sdk.MetaCaller || k == sdk.MetaCall {
			continue
		}
		out[k] = v
	}
	out.Set(sdk.MetaCaller, c.ID())
	// A call id goes on only from a plugin the call reached, and then
	// reaches the provider too.
	if id := first(md.Get(sdk.MetaCall)); id != "" {
		if r.Pass(id, c.ID(), ep.ID()) {
			out.Set(sdk.MetaCall, id)
		}
	}
	ctx = metadata.NewOutgoingContext(ctx, out)
	// A reload drains in-flight calls before it stops the old provider.
	// Known streams (watches) are long-lived by design: they are cut at
	// the stop and their callers re-subscribe, so only the rest is
	// counted.
	if kind != Streaming {
		p.Begin()
		defer p.End()
	}
	if kind == Unary {
		return relayUnary(ctx, r, ss, p, method)
	}
	return relay(ctx, r, ss, p, method)
}

// ServiceOf is the gRPC service of a full method name.
func ServiceOf(method string) string {
	method = strings.TrimPrefix(method, "/")
	if i := strings.LastIndexByte(method, '/'); i >= 0 {
		return method[:i]
	}
	return method
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
