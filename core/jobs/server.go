package jobs

import (
	"context"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Server serves Jobs as dsh.jobs.v1.Jobs: the one place where the seam's
// errors become status codes.
type Server struct {
	jobsv1.UnimplementedJobsServer
	impl Jobs
}

// NewServer wraps an implementation for registering with a grpc.Server.
func NewServer(impl Jobs) *Server { return &Server{impl: impl} }

var _ jobsv1.JobsServer = (*Server)(nil)

func (s *Server) Register(ctx context.Context, req *RegisterRequest) (*Job, error) {
	j, err := s.impl.Register(ctx, req)
	return j, seam.ToStatus(err, serverKinds...)
}

func (s *Server) Read(ctx context.Context, ref *jobsv1.JobRef) (*JobRead, error) {
	r, err := s.impl.Read(ctx, ref.Id)
	return r, seam.ToStatus(err, serverKinds...)
}

func (s *Server) Kill(ctx context.Context, ref *jobsv1.JobRef) (*jobsv1.KillResponse, error) {
	killed, err := s.impl.Kill(ctx, ref.Id)
	if err != nil {
		return nil, seam.ToStatus(err, serverKinds...)
	}
	return &jobsv1.KillResponse{Killed: killed}, nil
}

func (s *Server) List(ctx context.Context, _ *jobsv1.ListRequest) (*jobsv1.ListResponse, error) {
	jobs, err := s.impl.List(ctx)
	if err != nil {
		return nil, seam.ToStatus(err, serverKinds...)
	}
	return &jobsv1.ListResponse{Jobs: jobs}, nil
}
