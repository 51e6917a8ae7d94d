package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/sdk"
)

// relayUnary forwards one request and its reply: a cheaper path than a
// stream relay for the common case.
func relayUnary(ctx context.Context, r Router, ss grpc.ServerStream, p Provider, method string) error {
	req := &frame{}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	var reply frame
	var header, trailer metadata.MD
	err := p.Conn().Invoke(ctx, method, req, &reply, grpc.ForceCodec(proxyCodec{}), grpc.Header(&header), grpc.Trailer(&trailer))
	if len(header) > 0 {
		_ = ss.SetHeader(header)
	}
	ss.SetTrailer(trailer)
	if err != nil {
		return Gone(ctx, p, err, r.CallTimeout())
	}
	return ss.SendMsg(&reply)
}

// relay pumps frames between the caller's stream and the provider's.
func relay(ctx context.Context, r Router, ss grpc.ServerStream, p Provider, method string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := p.Conn().NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(proxyCodec{}))
	if err != nil {
		return Gone(ctx, p, err, r.CallTimeout())
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
			return Gone(ctx, p, err, r.CallTimeout())
		}
		if err := ss.SendMsg(f); err != nil {
			return err
		}
	}
}

// Gone turns a failed call to p into what its caller can act on: a
// provider that died or hung during the call is named, with what happened
// to it; a call that ran out of time says so (timeout is the call
// deadline it had).
func Gone(ctx context.Context, p Provider, err error, timeout time.Duration) error {
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
		case <-p.Exited():
		case <-time.After(200 * time.Millisecond):
			if st.Code() == codes.Unavailable {
				return sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, fmt.Sprintf("plugin %q is unreachable: %s", p.ID(), st.Message()))
			}
			return err
		}
		return sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, fmt.Sprintf("plugin %q (%s) %s while the call was running; the call did not complete", p.ID(), p.Binary(), p.Ended()))
	case codes.DeadlineExceeded:
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= 0 {
			return status.Errorf(codes.DeadlineExceeded, "plugin %q did not answer within the call deadline (host.callTimeout %v)", p.ID(), timeout)
		}
	}
	return err
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
