package jobs

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/jobs"
	"github.com/dshrun/dsh/core/jobs/jobsv1"
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
	// Reaches, if set, refuses an executor key the plugin served may not
	// call: a job extends the owner's call to the executor, which the
	// plugin could not have done itself.
	Reaches func(key string) error
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
	key := req.ShellKey
	if key == "" {
		key = jobs.DefaultShellKey
	}
	if s.Reaches != nil {
		if err := s.Reaches(key); err != nil {
			return nil, err
		}
	}
	snap, err := s.M.Register(ctx, Registration{
		Plugin: s.Caller, Owner: owner, Key: key,
		ProcessID: req.ProcessId, Command: req.Command, Description: req.Description,
	})
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
	snap, out, err := s.M.Read(ctx, owner, ref.Id)
	if err != nil {
		return nil, grpcError(err)
	}
	return &jobsv1.JobRead{
		Job:             JobProto(snap),
		Stdout:          out.Stdout,
		Stderr:          out.Stderr,
		Lossy:           out.Lossy,
		StdoutSpillPath: out.StdoutSpill,
		StderrSpillPath: out.StderrSpill,
		StdoutFacts:     out.StdoutFacts,
		StderrFacts:     out.StderrFacts,
	}, nil
}

func (s *Server) Kill(ctx context.Context, ref *jobsv1.JobRef) (*jobsv1.KillResponse, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	killed, err := s.M.Kill(ctx, owner, ref.Id)
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
	var se interface{ GRPCStatus() *status.Status }
	switch {
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrForeign):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrTooMany):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.As(err, &se):
		// The executor's failure (one restarting, gone), in our words.
		return status.Error(se.GRPCStatus().Code(), err.Error())
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
	case Running:
		j.Status = "running"
	case Completed:
		j.Status = "completed"
	default:
		j.Status = "killed"
	}
	if s.Status != Running && s.Signal == "" {
		code := int32(s.ExitCode)
		j.ExitCode = &code
	}
	return j
}
