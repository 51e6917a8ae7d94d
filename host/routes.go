package host

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
	"github.com/dshrun/dsh/host/hub"
)

// The host as the hub sees it: where a key is served, who may reach it,
// the call ids it honours and how long a call may take.

// newHostServer returns the gRPC server one plugin talks to: the hub's,
// serving dsh.plugin.v1.Host and the core services besides.
func (h *Host) newHostServer(c caller, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, h.coreInterceptors(c)...)
	s := hub.NewServer(routes{h}, hubCaller{h: h, c: c}, opts...)
	pluginv1.RegisterHostServer(s, &hostService{h: h, c: c})
	h.registerCore(s, c)
	return s
}

// routes is the host's Router. It is one pointer wide, so it goes in an
// interface without an allocation (as provider does, on every call).
type routes struct{ h *Host }

var _ hub.Router = routes{}

func (r routes) KeyOf(service string) string { return r.h.keyOfService(service) }

func (r routes) Endpoint(key string) (hub.Endpoint, bool) {
	ep, ok := r.h.endpoint(key)
	if !ok {
		return nil, false
	}
	return ep, true
}

func (r routes) Begin(owner, plugin string) (string, func()) { return r.h.calls.begin(owner, plugin) }

func (r routes) Pass(call, from, to string) bool { return r.h.calls.pass(call, from, to) }

func (r routes) CallTimeout() time.Duration { return r.h.callTimeout() }

func (r routes) RestartWait() time.Duration { return r.h.restartWait() }

var _ hub.Endpoint = (*endpoint)(nil)

func (e *endpoint) ID() string { return e.id }

func (e *endpoint) Serves(service string) bool { return e.services[service] }

func (e *endpoint) Kind(method string) hub.Kind { return e.kinds.Of(method) }

func (e *endpoint) Get(ctx context.Context, wait time.Duration) (hub.Provider, error) {
	ld, err := e.slot.get(ctx, e.id, wait)
	if err != nil {
		return nil, err
	}
	return provider{ld}, nil
}

// provider is a load as the hub reaches it.
type provider struct{ ld *load }

var _ hub.Provider = provider{}

func (p provider) ID() string              { return p.ld.en.id }
func (p provider) Conn() *grpc.ClientConn  { return p.ld.proc.Conn() }
func (p provider) Begin()                  { p.ld.inflight.begin() }
func (p provider) End()                    { p.ld.inflight.end() }
func (p provider) Binary() string          { return p.ld.proc.Binary() }
func (p provider) Exited() <-chan struct{} { return p.ld.proc.Exited() }

func (p provider) Ended() string {
	switch {
	case p.ld.stopping.Load():
		return "was stopped"
	case p.ld.unresponsive.Load():
		return "stopped answering its health checks and was killed"
	}
	return "exited"
}

// gone is hub.Gone for a call the host made to ld itself.
func gone(ctx context.Context, ld *load, err error) error {
	return hub.Gone(ctx, provider{ld}, err, ld.en.h.callTimeout())
}

// hubCaller is a caller as the hub sees it, with the host's capability
// check.
type hubCaller struct {
	h *Host
	c caller
}

func (hc hubCaller) ID() string                 { return hc.c.callerID() }
func (hc hubCaller) Authorize(key string) error { return hc.h.authorize(hc.c, key) }
func (hc hubCaller) Touch(key string)           { hc.c.touch(key) }
