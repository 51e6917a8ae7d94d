package jobtable

import (
	"context"

	"github.com/dshrun/dsh/core/jobs"
	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// Service is ctx.jobs for one plugin: the Manager behind the seam
// (jobs.NewServer serves it). Serving tells, for a request, the agent
// whose call it serves (stamped by the host); jobs belong to agents, so a
// request that serves none is refused. The owner a request names is not
// used.
type Service struct {
	M *Manager
	// Caller is the plugin served: the one its jobs' notices go to.
	Caller  string
	Serving seam.Serving
	// Reaches, if set, refuses an executor key the plugin served may not
	// call: a job extends the owner's call to the executor, which the
	// plugin could not have done itself.
	Reaches func(key string) error
}

var _ jobs.Jobs = (*Service)(nil)

// errNoOwner refuses a request that serves no agent's call.
var errNoOwner = seam.New(sdk.ErrPermissionDenied, "jobs belong to an agent, and this request serves no agent's tool call (make it while serving one, with the context the call came with)")

func (s *Service) owner(ctx context.Context) (string, error) { return s.Serving.Owner(ctx, errNoOwner) }

func (s *Service) Register(ctx context.Context, req *jobs.RegisterRequest) (*jobs.Job, error) {
	served, ok := s.Serving.Of(ctx)
	if !ok {
		return nil, errNoOwner
	}
	owner := served.Owner
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
		Call: served.Call,
	})
	if err != nil {
		return nil, err
	}
	return JobProto(snap), nil
}

func (s *Service) Read(ctx context.Context, id string) (*jobs.JobRead, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	snap, out, err := s.M.Read(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &jobs.JobRead{
		Job:             JobProto(snap),
		Stdout:          out.Stdout,
		Stderr:          out.Stderr,
		Lossy:           out.Lossy,
		StdoutSpillPath: out.StdoutSpill,
		StderrSpillPath: out.StderrSpill,
		StdoutFacts:     out.StdoutFacts,
		StderrFacts:     out.StderrFacts,
		Sandbox:         out.Sandbox,
	}, nil
}

func (s *Service) Kill(ctx context.Context, id string) (bool, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return false, err
	}
	return s.M.Kill(ctx, owner, id)
}

func (s *Service) List(ctx context.Context) ([]*jobs.Job, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	var out []*jobs.Job
	for _, snap := range s.M.List(owner) {
		out = append(out, JobProto(snap))
	}
	return out, nil
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
		Limits:        s.Limits,
		UnreadBytes:   s.Unread,
	}
	if !s.Finished.IsZero() {
		j.FinishedUnixMs = s.Finished.UnixMilli()
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
