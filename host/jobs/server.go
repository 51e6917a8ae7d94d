package jobs

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/host/subprocess"
	"github.com/dshrun/dsh/plugins/jobs/jobsv1"
)

// Server serves a Manager as dsh.jobs.v1.Jobs.
type Server struct {
	jobsv1.UnimplementedJobsServer
	M *Manager
}

var _ jobsv1.JobsServer = (*Server)(nil)

func (s *Server) Register(_ context.Context, req *jobsv1.RegisterRequest) (*jobsv1.Job, error) {
	snap, err := s.M.Register(req.Owner, req.ProcessId, req.Command, req.Description)
	if err != nil {
		return nil, grpcError(err)
	}
	return JobProto(snap), nil
}

func (s *Server) Read(_ context.Context, ref *jobsv1.JobRef) (*jobsv1.JobRead, error) {
	snap, r, err := s.M.Read(ref.Owner, ref.Id)
	if err != nil {
		return nil, grpcError(err)
	}
	return &jobsv1.JobRead{
		Job:             JobProto(snap),
		Stdout:          r.Stdout.Data,
		Stderr:          r.Stderr.Data,
		Lossy:           r.Lossy,
		StdoutSpillPath: r.Stdout.SpillPath,
		StderrSpillPath: r.Stderr.SpillPath,
		StdoutFacts:     subprocess.FactsProto(r.Stdout),
		StderrFacts:     subprocess.FactsProto(r.Stderr),
	}, nil
}

func (s *Server) Kill(_ context.Context, ref *jobsv1.JobRef) (*jobsv1.KillResponse, error) {
	killed, err := s.M.Kill(ref.Owner, ref.Id)
	if err != nil {
		return nil, grpcError(err)
	}
	return &jobsv1.KillResponse{Killed: killed}, nil
}

func (s *Server) List(_ context.Context, req *jobsv1.ListRequest) (*jobsv1.ListResponse, error) {
	resp := &jobsv1.ListResponse{}
	for _, snap := range s.M.List(req.Owner) {
		resp.Jobs = append(resp.Jobs, JobProto(snap))
	}
	return resp, nil
}

func (s *Server) TakeNotices(_ context.Context, req *jobsv1.NoticesRequest) (*jobsv1.NoticesResponse, error) {
	resp := &jobsv1.NoticesResponse{}
	for _, snap := range s.M.TakeNotices(req.Owner) {
		resp.Finished = append(resp.Finished, JobProto(snap))
	}
	return resp, nil
}

func grpcError(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrForeign):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrTooMany):
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.FailedPrecondition, err.Error())
}

// JobProto converts a Snapshot for the wire.
func JobProto(s Snapshot) *jobsv1.Job {
	j := &jobsv1.Job{
		Id:            s.ID,
		Owner:         s.Owner,
		Command:       s.Command,
		Description:   s.Description,
		Signal:        s.Signal,
		StartedUnixMs: s.Started.UnixMilli(),
		Pid:           int32(s.Pid),
	}
	switch s.Status {
	case subprocess.Running:
		j.Status = "running"
	case subprocess.Completed:
		j.Status = "completed"
	default:
		j.Status = "killed"
	}
	if s.Status != subprocess.Running && s.Signal == "" {
		code := int32(s.ExitCode)
		j.ExitCode = &code
	}
	return j
}
