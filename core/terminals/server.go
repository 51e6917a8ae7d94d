package terminals

import (
	"context"
	"time"

	"github.com/dshrun/dsh/core/terminals/terminalsv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Server serves Terminals as dsh.terminals.v1.Terminals: the one place
// where the seam's errors become status codes.
type Server struct {
	terminalsv1.UnimplementedTerminalsServer
	impl Terminals
}

// NewServer wraps an implementation for registering with a grpc.Server.
func NewServer(impl Terminals) *Server { return &Server{impl: impl} }

var _ terminalsv1.TerminalsServer = (*Server)(nil)

func (s *Server) RegisterBackend(ctx context.Context, req *terminalsv1.BackendRegistration) (*terminalsv1.BackendRegistered, error) {
	if err := s.impl.RegisterBackend(ctx, req.Name, req.Dialect); err != nil {
		return nil, seam.ToStatus(err, serverKinds...)
	}
	return &terminalsv1.BackendRegistered{}, nil
}

func (s *Server) Open(ctx context.Context, req *OpenRequest) (*Session, error) {
	r, err := s.impl.Open(ctx, req)
	return r, seam.ToStatus(err, serverKinds...)
}

func (s *Server) Send(ctx context.Context, req *SendRequest) (*Sent, error) {
	r, err := s.impl.Send(ctx, req)
	return r, seam.ToStatus(err, serverKinds...)
}

func (s *Server) Read(ctx context.Context, req *terminalsv1.ReadRequest) (*Output, error) {
	r, err := s.impl.Read(ctx, req.Id, time.Duration(min(max(req.WaitMs, 0), 1<<40))*time.Millisecond, int(min(max(req.Budget, 0), 1<<30)))
	return r, seam.ToStatus(err, serverKinds...)
}

func (s *Server) Signal(ctx context.Context, req *terminalsv1.SignalRequest) (*Signalled, error) {
	r, err := s.impl.Signal(ctx, req.Id, req.Signal, req.Target)
	return r, seam.ToStatus(err, serverKinds...)
}

func (s *Server) Resize(ctx context.Context, req *terminalsv1.ResizeRequest) (*Session, error) {
	r, err := s.impl.Resize(ctx, req.Id, int(min(req.Cols, 1<<20)), int(min(req.Rows, 1<<20)))
	return r, seam.ToStatus(err, serverKinds...)
}

func (s *Server) Close(ctx context.Context, req *terminalsv1.SessionRef) (*Session, error) {
	r, err := s.impl.Close(ctx, req.Id)
	return r, seam.ToStatus(err, serverKinds...)
}

func (s *Server) List(ctx context.Context, _ *terminalsv1.ListRequest) (*terminalsv1.ListResponse, error) {
	list, err := s.impl.List(ctx)
	if err != nil {
		return nil, seam.ToStatus(err, serverKinds...)
	}
	return &terminalsv1.ListResponse{Sessions: list}, nil
}
