package sandbox

import (
	"context"

	"github.com/dshrun/dsh/core/sandbox/sandboxv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Server serves Policies as dsh.sandbox.v1.SandboxPolicy: the one place
// where the seam's errors become status codes.
type Server struct {
	sandboxv1.UnimplementedSandboxPolicyServer
	impl Policies
}

// NewServer wraps an implementation for registering with a grpc.Server.
func NewServer(impl Policies) *Server { return &Server{impl: impl} }

var _ sandboxv1.SandboxPolicyServer = (*Server)(nil)

func (s *Server) Get(ctx context.Context, _ *sandboxv1.GetPolicyRequest) (*Policy, error) {
	p, err := s.impl.Get(ctx)
	return p, seam.ToStatus(err, kinds...)
}

// RunnerServer serves Sandboxes as dsh.sandbox.v1.Sandbox.
type RunnerServer struct {
	sandboxv1.UnimplementedSandboxServer
	impl Sandboxes
}

// NewRunnerServer wraps an implementation for registering with a
// grpc.Server.
func NewRunnerServer(impl Sandboxes) *RunnerServer { return &RunnerServer{impl: impl} }

var _ sandboxv1.SandboxServer = (*RunnerServer)(nil)

func (s *RunnerServer) Wrap(ctx context.Context, req *WrapRequest) (*Wrapped, error) {
	w, err := s.impl.Wrap(ctx, req)
	return w, seam.ToStatus(err, runnerKinds...)
}

func (s *RunnerServer) Settle(ctx context.Context, req *SettleRequest) (*Settled, error) {
	st, err := s.impl.Settle(ctx, req)
	return st, seam.ToStatus(err, runnerKinds...)
}
