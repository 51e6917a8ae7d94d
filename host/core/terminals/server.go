package terminals

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// Service is ctx.terminals for one plugin: the Manager behind the seam
// (terminals.NewServer serves it). Owner tells, for a request, the agent
// whose call it serves (stamped by the host); sessions belong to agents,
// so a request that serves none is refused. Caller is the plugin served,
// as a backend it may register.
type Service struct {
	M      *Manager
	Caller Caller
	Owner  func(context.Context) (string, bool)
}

var _ terminals.Terminals = (*Service)(nil)

// errNoOwner refuses a request that serves no agent's call.
var errNoOwner = seam.New(sdk.ErrPermissionDenied, "terminal sessions belong to an agent, and this request serves no agent's tool call (make it while serving one, with the context the call came with)")

func (s *Service) owner(ctx context.Context) (string, error) {
	if s.Owner == nil {
		return "", errNoOwner
	}
	o, ok := s.Owner(ctx)
	if !ok {
		return "", errNoOwner
	}
	return o, nil
}

func (s *Service) RegisterBackend(_ context.Context, name, dialect string) error {
	return s.M.RegisterBackend(s.Caller, name, dialect)
}

func (s *Service) Open(ctx context.Context, req *terminals.OpenRequest) (*terminals.Session, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	in, err := s.M.Open(ctx, owner, OpenRequest{Backend: req.Backend, Name: req.Name, Cwd: req.Cwd, Cols: int(req.Cols), Rows: int(req.Rows)})
	if err != nil {
		return nil, hostError(err)
	}
	return SessionProto(in), nil
}

func (s *Service) Send(ctx context.Context, req *terminals.SendRequest) (*terminals.Session, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	in, err := s.M.Send(ctx, owner, req.Id, req.Text, req.Submit, req.Signal)
	if err != nil {
		return nil, hostError(err)
	}
	return SessionProto(in), nil
}

func (s *Service) Read(ctx context.Context, id string, wait time.Duration) (*terminals.Output, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.M.Read(ctx, owner, id, wait)
	if err != nil {
		return nil, hostError(err)
	}
	return &terminals.Output{Session: SessionProto(out.Info), Data: out.Data, Dropped: out.Dropped, AtPrompt: out.AtPrompt}, nil
}

func (s *Service) Signal(ctx context.Context, id, signal string, target terminals.Target) (*terminals.Signalled, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	ok, in, err := s.M.Signal(owner, id, signal, target == terminals.TargetShell)
	if err != nil {
		return nil, hostError(err)
	}
	return &terminals.Signalled{Delivered: ok, Session: SessionProto(in)}, nil
}

func (s *Service) Resize(ctx context.Context, id string, cols, rows int) (*terminals.Session, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	in, err := s.M.Resize(owner, id, cols, rows)
	if err != nil {
		return nil, hostError(err)
	}
	return SessionProto(in), nil
}

func (s *Service) Close(ctx context.Context, id string) (*terminals.Session, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	in, err := s.M.CloseSession(ctx, owner, id)
	if err != nil {
		return nil, hostError(err)
	}
	return SessionProto(in), nil
}

func (s *Service) List(ctx context.Context) ([]*terminals.Session, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	list, err := s.M.List(owner)
	if err != nil {
		return nil, hostError(err)
	}
	out := make([]*terminals.Session, 0, len(list))
	for _, in := range list {
		out = append(out, SessionProto(in))
	}
	return out, nil
}

// hostError keeps the reason of a host failure on its way out (a backend
// plugin gone or restarting, wrapped in the registry's words): the seam's
// adapter keeps the code of a wrapped status but not its reason, and
// UNAVAILABLE without one is ctx.terminals' own SERVICE_DISPOSING.
func hostError(err error) error {
	var e *sdk.Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(e, sdk.ErrProviderGone):
		return sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, err.Error())
	case errors.Is(e, sdk.ErrNotProvided):
		return sdk.HostError(codes.Unavailable, sdk.ReasonNotProvided, err.Error())
	}
	return err
}

// SessionProto converts an Info for the wire.
func SessionProto(in Info) *terminals.Session {
	s := &terminals.Session{
		Id:           in.ID,
		Name:         in.Name,
		Backend:      in.Backend,
		Dialect:      in.Dialect,
		Cwd:          in.Cwd,
		Cols:         uint32(in.Cols),
		Rows:         uint32(in.Rows),
		Status:       "running",
		Signal:       in.Signal,
		Pid:          int32(in.Pid),
		OpenedUnixMs: in.Opened.UnixMilli(),
	}
	if in.Exited {
		s.Status = "exited"
		if in.Signal == "" {
			code := int32(in.ExitCode)
			s.ExitCode = &code
		}
	}
	return s
}
