package subprocess

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
)

// Server serves a Manager to one plugin as dsh.subprocess.v1.Subprocess.
// Caller is that plugin's entry id. Owner tells, for a request, the agent
// whose call it serves (stamped by the host); a request that serves none
// acts for the plugin itself. The owner a request names is not used: no
// plugin chooses whom a process belongs to.
type Server struct {
	subprocessv1.UnimplementedSubprocessServer
	M      *Manager
	Caller string
	Owner  func(context.Context) (string, bool)
}

// owner is whom the request acts for.
func (s *Server) owner(ctx context.Context) string {
	if s.Owner != nil {
		if o, ok := s.Owner(ctx); ok {
			return o
		}
	}
	return s.Caller
}

var _ subprocessv1.SubprocessServer = (*Server)(nil)

func (s *Server) spec(ctx context.Context, req *subprocessv1.SpawnRequest) Spec {
	spec := Spec{
		Argv:           req.Argv,
		Dir:            req.Dir,
		Env:            req.Env,
		Owner:          s.owner(ctx),
		Timeout:        time.Duration(req.TimeoutMs) * time.Millisecond,
		Grace:          time.Duration(req.GraceMs) * time.Millisecond,
		MaxOutputBytes: int(req.MaxOutputBytes),
		MaxSpillBytes:  req.MaxSpillBytes,
	}
	if req.HasStdin {
		spec.Stdin = req.Stdin
		if spec.Stdin == nil {
			spec.Stdin = []byte{}
		}
	}
	return spec
}

func (s *Server) Run(ctx context.Context, req *subprocessv1.SpawnRequest) (*subprocessv1.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.Error(codes.Canceled, "run: the call was already cancelled")
	}
	spec := s.spec(ctx, req)
	// The call's context is the caller's abort: if the caller goes away
	// (cancels, or its process dies), the command's tree is killed.
	spec.Abort = ctx
	p, err := s.M.Spawn(spec)
	if err != nil {
		return nil, spawnError(err)
	}
	<-p.Done()
	s.M.Forget(p.ID)
	return ResultProto(p.Result()), nil
}

func (s *Server) Start(ctx context.Context, req *subprocessv1.SpawnRequest) (*subprocessv1.StartResponse, error) {
	spec := s.spec(ctx, req)
	spec.Timeout = 0 // background processes have no timeout
	var p *Process
	if req.SettleFailure {
		p = s.M.SpawnSettled(spec)
	} else {
		var err error
		if p, err = s.M.Spawn(spec); err != nil {
			return nil, spawnError(err)
		}
	}
	return &subprocessv1.StartResponse{Id: p.ID, Pid: int32(p.Pid)}, nil
}

func (s *Server) get(ctx context.Context, id string) (*Process, error) {
	p, err := s.M.Get(s.owner(ctx), id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	return p, nil
}

func (s *Server) Read(ctx context.Context, ref *subprocessv1.ProcessRef) (*subprocessv1.ReadResponse, error) {
	p, err := s.get(ctx, ref.Id)
	if err != nil {
		return nil, err
	}
	r := p.Read()
	resp := &subprocessv1.ReadResponse{
		Stdout: collectedProto(r.Stdout),
		Stderr: collectedProto(r.Stderr),
		Lossy:  r.Lossy,
		Status: statusProto(r.Status),
		Signal: r.Signal,
	}
	if r.Status == Completed {
		code := int32(r.ExitCode)
		resp.ExitCode = &code
	}
	return resp, nil
}

func (s *Server) Kill(ctx context.Context, ref *subprocessv1.ProcessRef) (*subprocessv1.KillResponse, error) {
	p, err := s.get(ctx, ref.Id)
	if err != nil {
		return nil, err
	}
	return &subprocessv1.KillResponse{Killed: p.Kill()}, nil
}

func (s *Server) Wait(ctx context.Context, ref *subprocessv1.ProcessRef) (*subprocessv1.Result, error) {
	p, err := s.get(ctx, ref.Id)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return ResultProto(p.Result()), nil
}

func spawnError(err error) error {
	var se *Error
	if errors.As(err, &se) {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// ResultProto converts a Result for the wire.
func ResultProto(r Result) *subprocessv1.Result {
	out := &subprocessv1.Result{
		Status:     statusProto(r.Status),
		Signal:     r.Signal,
		TimedOut:   r.TimedOut,
		Aborted:    r.Aborted,
		DurationMs: r.Duration.Milliseconds(),
		Stdout:     collectedProto(r.Stdout),
		Stderr:     collectedProto(r.Stderr),
	}
	if r.Signal == "" {
		code := int32(r.ExitCode)
		out.ExitCode = &code
	}
	return out
}

func collectedProto(c Collected) *subprocessv1.Collected {
	return &subprocessv1.Collected{
		Data:          c.Data,
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

// FactsProto is a stream's facts without its data, for messages that carry
// the data elsewhere.
func FactsProto(c Collected) *subprocessv1.Collected {
	c.Data = nil
	return collectedProto(c)
}

func statusProto(s Status) subprocessv1.Status {
	switch s {
	case Running:
		return subprocessv1.Status_STATUS_RUNNING
	case Completed:
		return subprocessv1.Status_STATUS_COMPLETED
	case Killed:
		return subprocessv1.Status_STATUS_KILLED
	}
	return subprocessv1.Status_STATUS_UNSPECIFIED
}
