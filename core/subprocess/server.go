package subprocess

import (
	"context"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Server serves Processes as dsh.subprocess.v1.Subprocess: the one place
// where the seam's errors become status codes.
type Server struct {
	subprocessv1.UnimplementedSubprocessServer
	impl Processes
}

// NewServer wraps an implementation for registering with a grpc.Server.
func NewServer(impl Processes) *Server { return &Server{impl: impl} }

var _ subprocessv1.SubprocessServer = (*Server)(nil)

func (s *Server) Run(ctx context.Context, req *SpawnRequest) (*Result, error) {
	r, err := s.impl.Run(ctx, req)
	return r, seam.ToStatus(err, kinds...)
}

func (s *Server) Start(ctx context.Context, req *SpawnRequest) (*Started, error) {
	r, err := s.impl.Start(ctx, req)
	return r, seam.ToStatus(err, kinds...)
}

func (s *Server) Read(ctx context.Context, ref *subprocessv1.ProcessRef) (*ReadResult, error) {
	r, err := s.impl.Read(ctx, ref.Id)
	return r, seam.ToStatus(err, kinds...)
}

func (s *Server) Kill(ctx context.Context, ref *subprocessv1.ProcessRef) (*subprocessv1.KillResponse, error) {
	killed, err := s.impl.Kill(ctx, ref.Id)
	if err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &subprocessv1.KillResponse{Killed: killed}, nil
}

func (s *Server) Wait(ctx context.Context, ref *subprocessv1.ProcessRef) (*Result, error) {
	r, err := s.impl.Wait(ctx, ref.Id)
	return r, seam.ToStatus(err, kinds...)
}
