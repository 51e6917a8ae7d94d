package shell

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
)

// Server serves an Executor as dsh.shell.v1.Shell: the one place where the
// seam's errors become status codes.
type Server struct {
	shellv1.UnimplementedShellServer
	impl Executor
}

// NewServer wraps an implementation for Register(*grpc.Server).
func NewServer(impl Executor) *Server { return &Server{impl: impl} }

var _ shellv1.ShellServer = (*Server)(nil)

func (s *Server) Resolve(ctx context.Context, req *ExecRequest) (*ExecSpec, error) {
	r, err := s.impl.Resolve(ctx, req)
	return r, toStatus(err)
}

func (s *Server) Run(ctx context.Context, spec *ExecSpec) (*RunResult, error) {
	r, err := s.impl.Run(ctx, spec)
	return r, toStatus(err)
}

func (s *Server) Exec(ctx context.Context, req *ExecRequest) (*RunResult, error) {
	r, err := s.impl.Exec(ctx, req)
	if status.Code(toStatus(err)) == codes.Unimplemented {
		// From further down: callers read UNIMPLEMENTED from Exec as
		// "this executor has no Exec".
		return nil, status.Error(codes.Internal, "exec: "+err.Error())
	}
	return r, toStatus(err)
}

func (s *Server) Start(ctx context.Context, spec *ExecSpec) (*Started, error) {
	r, err := s.impl.Start(ctx, spec)
	return r, toStatus(err)
}

func (s *Server) ReadOutput(ctx context.Context, ref *shellv1.ProcessRef) (*ProcessRead, error) {
	r, err := s.impl.ReadOutput(ctx, ref.Id)
	return r, toStatus(err)
}

func (s *Server) Kill(ctx context.Context, ref *shellv1.ProcessRef) (*shellv1.KillResponse, error) {
	killed, err := s.impl.Kill(ctx, ref.Id)
	if err != nil {
		return nil, toStatus(err)
	}
	return &shellv1.KillResponse{Killed: killed}, nil
}

func (s *Server) Wait(ctx context.Context, ref *shellv1.ProcessRef) (*ProcessState, error) {
	r, err := s.impl.Wait(ctx, ref.Id)
	return r, toStatus(err)
}

func (s *Server) Limits(ctx context.Context, _ *shellv1.LimitsRequest) (*Limits, error) {
	r, err := s.impl.Limits(ctx)
	return r, toStatus(err)
}

// kinds are the seam's own errors and the codes they travel as.
var kinds = []seam.Kind{
	{Err: ErrInvalid, Code: codes.InvalidArgument},
	{Err: ErrCannotRun, Code: codes.FailedPrecondition},
	{Err: ErrNotFound, Code: codes.NotFound},
	{Err: ErrSandboxUnavailable, Code: codes.Aborted},
}

// toStatus gives an implementation's error its code.
func toStatus(err error) error { return seam.ToStatus(err, kinds...) }
