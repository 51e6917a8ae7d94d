package terminals

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/terminals/terminalsv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// kinds are the seam's own errors and the codes they travel as. Another
// owner's session is a refusal like any other: it travels as
// PERMISSION_DENIED and comes back as sdk.ErrPermissionDenied.
var (
	kinds = []seam.Kind{
		{Err: ErrNoSession, Code: codes.NotFound},
		{Err: ErrDuplicateName, Code: codes.AlreadyExists},
		{Err: ErrDuplicateBackend, Code: codes.OutOfRange},
		{Err: ErrNoBackend, Code: codes.FailedPrecondition},
		{Err: ErrSendActive, Code: codes.Aborted},
		{Err: ErrServiceDisposing, Code: codes.Unavailable},
		{Err: ErrOwnerNotLive, Code: codes.Unauthenticated},
		{Err: ErrTooMany, Code: codes.ResourceExhausted},
		{Err: ErrShellKill, Code: codes.InvalidArgument, Reason: ReasonShellKill},
		{Err: ErrInvalid, Code: codes.InvalidArgument},
	}
	serverKinds = append([]seam.Kind{{Err: ErrForeignSession, Code: codes.PermissionDenied}}, kinds...)
)

// callError is a failed call in the seam's words. A failure the host
// marked with a reason of the sdk's (a backend plugin that is gone or
// restarting, a key not provided) is in the sdk vocabulary whatever its
// code: UNAVAILABLE without one is ctx.terminals' own SERVICE_DISPOSING.
func callError(op string, err error, kinds ...seam.Kind) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		if reason := seam.ReasonOf(st); reason != "" && !slices.ContainsFunc(kinds, func(k seam.Kind) bool { return k.Reason == reason }) {
			return fmt.Errorf("%s: %w", op, sdk.FromRPC(err))
		}
	}
	return seam.CallError(op, err, kinds...)
}

// Client is a plugin's view of ctx.terminals over gRPC.
type Client struct {
	c terminalsv1.TerminalsClient
}

var _ Terminals = (*Client)(nil)

// NewClient wraps a connection to ctx.terminals.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: terminalsv1.NewTerminalsClient(conn)}
}

func (c *Client) RegisterBackend(ctx context.Context, name, dialect string) error {
	_, err := c.c.RegisterBackend(ctx, &terminalsv1.BackendRegistration{Name: name, Dialect: dialect})
	return callError("register terminal backend "+name, err, kinds...)
}

func (c *Client) Open(ctx context.Context, req *OpenRequest) (*Session, error) {
	s, err := c.c.Open(ctx, req)
	if err != nil {
		return nil, callError("open a terminal", err, kinds...)
	}
	return s, nil
}

func (c *Client) Send(ctx context.Context, req *SendRequest) (*Sent, error) {
	s, err := c.c.Send(ctx, req)
	if err != nil {
		return nil, callError("send to terminal "+req.Id, err, kinds...)
	}
	return s, nil
}

func (c *Client) Read(ctx context.Context, id string, wait time.Duration, budget int) (*Output, error) {
	o, err := c.c.Read(ctx, &terminalsv1.ReadRequest{Id: id, WaitMs: wait.Milliseconds(), Budget: int64(max(budget, 0))})
	if err != nil {
		return nil, callError("read terminal "+id, err, kinds...)
	}
	return o, nil
}

func (c *Client) Signal(ctx context.Context, id, signal string, target Target) (*Signalled, error) {
	s, err := c.c.Signal(ctx, &terminalsv1.SignalRequest{Id: id, Signal: signal, Target: target})
	if err != nil {
		return nil, callError("signal terminal "+id, err, kinds...)
	}
	return s, nil
}

func (c *Client) Resize(ctx context.Context, id string, cols, rows int) (*Session, error) {
	s, err := c.c.Resize(ctx, &terminalsv1.ResizeRequest{Id: id, Cols: uint32(max(cols, 0)), Rows: uint32(max(rows, 0))})
	if err != nil {
		return nil, callError("resize terminal "+id, err, kinds...)
	}
	return s, nil
}

func (c *Client) Close(ctx context.Context, id string) (*Session, error) {
	s, err := c.c.Close(ctx, &terminalsv1.SessionRef{Id: id})
	if err != nil {
		return nil, callError("close terminal "+id, err, kinds...)
	}
	return s, nil
}

func (c *Client) List(ctx context.Context) ([]*Session, error) {
	r, err := c.c.List(ctx, &terminalsv1.ListRequest{})
	if err != nil {
		return nil, callError("list terminals", err, kinds...)
	}
	return r.Sessions, nil
}
