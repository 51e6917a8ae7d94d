package jobs

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/host/core/subprocess"
)

// Server serves a Manager as dsh.jobs.v1.Jobs. Owner tells, for a
// request, the agent whose call it serves (stamped by the host); jobs
// belong to agents, so a request that serves none is refused. The owner a
// request names is not used.
type Server struct {
	jobsv1.UnimplementedJobsServer
	M *Manager
	// Caller is the plugin served: the one its jobs' notices go to.
	Caller string
	Owner  func(context.Context) (string, bool)
}

// errNoOwner refuses a request that serves no agent's call.
var errNoOwner = status.Error(codes.PermissionDenied, "jobs belong to an agent, and this request serves no agent's tool call (make it while serving one, with the context the call came with)")

func (s *Server) owner(ctx context.Context) (string, error) {
	if s.Owner == nil {
		return "", errNoOwner
	}
	o, ok := s.Owner(ctx)
	if !ok {
		return "", errNoOwner
	}
	return o, nil
}

var _ jobsv1.JobsServer = (*Server)(nil)

func (s *Server) Register(ctx context.Context, req *jobsv1.RegisterRequest) (*jobsv1.Job, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := s.M.RegisterBy(s.Caller, owner, req.ProcessId, req.Command, req.Description)
	if err != nil {
		return nil, grpcError(err)
	}
	return JobProto(snap), nil
}

func (s *Server) Read(ctx context.Context, ref *jobsv1.JobRef) (*jobsv1.JobRead, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	snap, r, err := s.M.Read(owner, ref.Id)
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
		StdoutFacts:     factsProto(r.Stdout),
		StderrFacts:     factsProto(r.Stderr),
	}, nil
}

func (s *Server) Kill(ctx context.Context, ref *jobsv1.JobRef) (*jobsv1.KillResponse, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	killed, err := s.M.Kill(owner, ref.Id)
	if err != nil {
		return nil, grpcError(err)
	}
	return &jobsv1.KillResponse{Killed: killed}, nil
}

func (s *Server) List(ctx context.Context, _ *jobsv1.ListRequest) (*jobsv1.ListResponse, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	resp := &jobsv1.ListResponse{}
	for _, snap := range s.M.List(owner) {
		resp.Jobs = append(resp.Jobs, JobProto(snap))
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

// factsProto is a stream's facts without its data (JobRead carries the
// data in its own fields).
func factsProto(c subprocess.Collected) *jobsv1.Collected {
	return &jobsv1.Collected{
		Total:         c.Total,
		Truncated:     c.Truncated,
		Dropped:       c.Dropped,
		DroppedLines:  c.DroppedLines,
		SpillPath:     c.SpillPath,
		SpillBytes:    c.SpillBytes,
		SpillComplete: c.SpillComplete,
		SpillReason:   string(c.SpillReason),
		SpillError:    c.SpillError,
	}
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
