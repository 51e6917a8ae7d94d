package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
	"github.com/dshrun/dsh/sdk"
)

// The hub is how plugins reach each other: each plugin gets its own gRPC
// server on its go-plugin broker, serving dsh.plugin.v1.Host and forwarding
// every other method to the current provider of the key the method belongs
// to. The caller's identity is fixed by which server the call arrived on, so
// the capability check cannot be talked around.

// newHostServer returns the gRPC server one plugin talks to.
func (h *Host) newHostServer(c caller, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts,
		grpc.ForceServerCodec(proxyCodec{}),
		grpc.UnknownServiceHandler(h.forward(c)),
	)
	opts = append(opts, h.coreInterceptors(c)...)
	s := grpc.NewServer(opts...)
	pluginv1.RegisterHostServer(s, &hostService{h: h, c: c})
	h.registerCore(s, c)
	return s
}

// forward returns the handler of every method the host does not serve
// itself: it finds the key, checks the capability and relays the call,
// streams included, to the provider without decoding the messages.
func (h *Host) forward(c caller) grpc.StreamHandler {
	return func(_ any, ss grpc.ServerStream) error {
		method, ok := grpc.MethodFromServerStream(ss)
		if !ok {
			return status.Error(codes.Internal, "no method in stream")
		}
		service := serviceOf(method)
		md, _ := metadata.FromIncomingContext(ss.Context())
		key := first(md.Get(sdk.MetaKey))
		if key == "" {
			key = h.keyOfService(service)
			if key == "" {
				return sdk.HostError(codes.Unimplemented, sdk.ReasonUnknownService, fmt.Sprintf("no plugin in this composition serves %s", service))
			}
		}
		if err := h.authorize(c, key); err != nil {
			return err
		}
		ep, ok := h.endpoint(key)
		if !ok {
			return sdk.HostError(codes.Unavailable, sdk.ReasonNotProvided, fmt.Sprintf("no provider of %q is active", key))
		}
		if !ep.services[service] {
			return sdk.HostError(codes.Unimplemented, sdk.ReasonUnknownService, fmt.Sprintf("%q is provided by %q, which does not serve %s", key, ep.id, service))
		}
		kind := ep.methodKind(method)
		ctx := ss.Context()
		if kind != streaming {
			// Known streams (watches) live as long as their caller wants;
			// every other call has a deadline, so a provider that hangs
			// cannot hold its caller forever.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, h.callTimeout())
			defer cancel()
		}
		ld, err := ep.slot.get(ctx, ep.id, h.restartWait())
		if err != nil {
			return sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, err.Error())
		}
		c.touch(key)
		out := metadata.MD{}
		for k, v := range md {
			if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" || k == sdk.MetaCaller || k == sdk.MetaCall {
				continue
			}
			out[k] = v
		}
		out.Set(sdk.MetaCaller, c.callerID())
		// A call id goes on only from a plugin the call reached, and then
		// reaches the provider too.
		if id := first(md.Get(sdk.MetaCall)); id != "" {
			if h.calls.pass(id, c.callerID(), ep.id) {
				out.Set(sdk.MetaCall, id)
			}
		}
		ctx = metadata.NewOutgoingContext(ctx, out)
		// A reload drains in-flight calls before it stops the old
		// provider. Known streams (watches) are long-lived by design: they
		// are cut at the stop and their callers re-subscribe, so only the
		// rest is counted.
		if kind != streaming {
			ld.inflight.begin()
			defer ld.inflight.end()
		}
		if kind == unary {
			return relayUnary(ctx, ss, ld, method)
		}
		return relay(ctx, ss, ld, method)
	}
}

type kind int

const (
	unknown   kind = iota // not compiled into the host: a third party's seam
	unary                 // one request, one reply
	streaming             // a stream either way
)

// describedKinds reads the method kinds a provider's description gives
// for its services (SDK plugins say them, so the host relays a third
// party's contract as well as its own).
func describedKinds(p *pluginv1.Provide) map[string]kind {
	if len(p.Methods) == 0 {
		return nil
	}
	kinds := make(map[string]kind, len(p.Methods))
	for _, m := range p.Methods {
		if !slices.Contains(p.GrpcServices, serviceOf(m.Name)) {
			continue // a key's methods are its services' only
		}
		if m.ClientStreaming || m.ServerStreaming {
			kinds[m.Name] = streaming
		} else {
			kinds[m.Name] = unary
		}
	}
	return kinds
}

// methodKind says whether method is known (its protobuf contract is
// compiled into the host) to be unary or streaming. Unknown methods are
// relayed as streams, which works for every kind.
func methodKind(method string) kind {
	service, name := serviceOf(method), method[strings.LastIndexByte(method, '/')+1:]
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return unknown
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return unknown
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	switch {
	case md == nil:
		return unknown
	case md.IsStreamingClient() || md.IsStreamingServer():
		return streaming
	default:
		return unary
	}
}

// relayUnary forwards one request and its reply: a cheaper path than a
// stream relay for the common case.
func relayUnary(ctx context.Context, ss grpc.ServerStream, ld *load, method string) error {
	req := &frame{}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	var reply frame
	var header, trailer metadata.MD
	err := ld.proc.Conn().Invoke(ctx, method, req, &reply, grpc.ForceCodec(proxyCodec{}), grpc.Header(&header), grpc.Trailer(&trailer))
	if len(header) > 0 {
		_ = ss.SetHeader(header)
	}
	ss.SetTrailer(trailer)
	if err != nil {
		return gone(ctx, ld, err)
	}
	return ss.SendMsg(&reply)
}

// relay pumps frames between the caller's stream and the provider's.
func relay(ctx context.Context, ss grpc.ServerStream, ld *load, method string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := ld.proc.Conn().NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(proxyCodec{}))
	if err != nil {
		return gone(ctx, ld, err)
	}
	upErr := make(chan error, 1)
	go func() {
		for {
			f := &frame{}
			if err := ss.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					upErr <- cs.CloseSend()
					return
				}
				upErr <- err
				cancel()
				return
			}
			if err := cs.SendMsg(f); err != nil {
				upErr <- nil // the provider's answer (below) says why
				return
			}
		}
	}()
	if hdr, err := cs.Header(); err == nil && len(hdr) > 0 {
		_ = ss.SendHeader(hdr)
	}
	for {
		f := &frame{}
		if err := cs.RecvMsg(f); err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return gone(ctx, ld, err)
		}
		if err := ss.SendMsg(f); err != nil {
			return err
		}
	}
}

// gone turns a failed call into what its caller can act on: a provider
// that died or hung during the call is named, with what happened to it; a
// call that ran out of time says so.
func gone(ctx context.Context, ld *load, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unavailable, codes.Canceled:
		if ctx.Err() != nil && st.Code() == codes.Canceled {
			return err // the caller went away: nothing to explain
		}
		select {
		case <-ld.proc.Exited():
		case <-time.After(200 * time.Millisecond):
			if st.Code() == codes.Unavailable {
				return sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, fmt.Sprintf("plugin %q is unreachable: %s", ld.en.id, st.Message()))
			}
			return err
		}
		why := "exited"
		if ld.unresponsive.Load() {
			why = "stopped answering its health checks and was killed"
		}
		if ld.stopping.Load() {
			why = "was stopped"
		}
		return sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, fmt.Sprintf("plugin %q (%s) %s while the call was running; the call did not complete", ld.en.id, ld.proc.Binary(), why))
	case codes.DeadlineExceeded:
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= 0 {
			return status.Errorf(codes.DeadlineExceeded, "plugin %q did not answer within the call deadline (host.callTimeout %v)", ld.en.id, ld.en.h.callTimeout())
		}
	}
	return err
}

func serviceOf(method string) string {
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

// frame is an undecoded message.
type frame struct{ payload []byte }

// proxyCodec passes frames through untouched and encodes everything else as
// protobuf, so forwarded calls cost no decoding while the host's own services
// on the same server work as usual.
type proxyCodec struct{}

func (proxyCodec) Marshal(v any) ([]byte, error) {
	if f, ok := v.(*frame); ok {
		return f.payload, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proxy codec: cannot marshal %T", v)
	}
	return proto.Marshal(m)
}

func (proxyCodec) Unmarshal(data []byte, v any) error {
	if f, ok := v.(*frame); ok {
		f.payload = append([]byte(nil), data...) // gRPC reuses data
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proxy codec: cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(data, m)
}

func (proxyCodec) Name() string { return "proto" }

// hostConn lets the host itself (front ends, tests, benchmarks) call the
// current provider of a key.
type hostConn struct {
	h   *Host
	key string
}

// provider finds the key's provider process, waiting while it restarts.
func (c hostConn) provider(ctx context.Context) (*load, error) {
	ep, ok := c.h.endpoint(c.key)
	if !ok {
		return nil, sdk.HostError(codes.Unavailable, sdk.ReasonNotProvided, fmt.Sprintf("no provider of %q is active", c.key))
	}
	ld, err := ep.slot.get(ctx, ep.id, c.h.restartWait())
	if err != nil {
		return nil, sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, err.Error())
	}
	return ld, nil
}

// HostOwner is the owner the host's own calls act for.
const HostOwner = "host"

func (c hostConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	ld, err := c.provider(ctx)
	if err != nil {
		return err
	}
	// The host's own calls act for the owner "host": their processes are
	// the host's, not the provider's, so they outlive its reloads.
	id, end := c.h.calls.begin(HostOwner, ld.en.id)
	defer end()
	ctx = metadata.AppendToOutgoingContext(ctx, sdk.MetaCaller, "host", sdk.MetaCall, id)
	ld.inflight.begin()
	defer ld.inflight.end()
	if err := ld.proc.Conn().Invoke(ctx, method, args, reply, opts...); err != nil {
		return gone(ctx, ld, err)
	}
	return nil
}

func (c hostConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	// A stream (a watch) acts for nobody: it gets no call id.
	ld, err := c.provider(ctx)
	if err != nil {
		return nil, err
	}
	return ld.proc.Conn().NewStream(metadata.AppendToOutgoingContext(ctx, sdk.MetaCaller, "host"), desc, method, opts...)
}
