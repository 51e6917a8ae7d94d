package termsessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/termsessions/screen"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// Service is ctx.terminals for one plugin: the Manager behind the seam
// (terminals.NewServer serves it). Serving tells, for a request, the
// agent whose call it serves and that call (stamped by the host; a run
// made for the call is found by it, Manager.LatestLine); sessions belong
// to agents, so a request that serves none is refused. Caller is the
// plugin served, as a backend it may register.
type Service struct {
	M       *Manager
	Caller  Caller
	Serving seam.Serving
}

var _ terminals.Terminals = (*Service)(nil)

// errNoOwner refuses a request that serves no agent's call.
var errNoOwner = seam.New(sdk.ErrPermissionDenied, "terminal sessions belong to an agent, and this request serves no agent's tool call (make it while serving one, with the context the call came with)")

func (s *Service) owner(ctx context.Context) (string, error) { return s.Serving.Owner(ctx, errNoOwner) }

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

func (s *Service) Send(ctx context.Context, req *terminals.SendRequest) (*terminals.Sent, error) {
	served, ok := s.Serving.Of(ctx)
	if !ok {
		return nil, errNoOwner
	}
	owner := served.Owner
	maxWait := terminals.MaxWait
	if req.Capture != nil {
		maxWait = terminals.MaxRunWait
	}
	if req.WaitMs < 0 || req.WaitMs > maxWait.Milliseconds() || req.Budget < 0 || req.Capture.GetMaxBytes() < 0 {
		return nil, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("a send's wait is 0 to %d ms (asked %d) and its budgets are not negative (asked %d and %d)", maxWait.Milliseconds(), req.WaitMs, req.Budget, req.Capture.GetMaxBytes()))
	}
	sr := SendRequest{Text: req.Text, Submit: req.Submit, Signal: req.Signal, Wait: time.Duration(req.WaitMs) * time.Millisecond, Budget: int(min(req.Budget, 1<<30))}
	if c := req.Capture; c != nil {
		sr.Capture = &Capture{From: c.From, Until: c.Until, MaxBytes: int(min(c.MaxBytes, maxCaptureBytes)), CloseOnCancel: c.CloseOnCancel, Call: served.Call}
	}
	out, err := s.M.Settle(ctx, owner, req.Id, sr)
	if err != nil {
		return nil, hostError(err)
	}
	r := &terminals.Sent{Session: SessionProto(out.Info), Wait: out.Wait, WaitDetail: out.Detail}
	if out.HasScreen {
		r.Screen = ScreenProto(out.Screen)
	}
	if c := out.Captured; c != nil {
		r.Captured = &terminals.Captured{Data: c.Data, Omitted: c.Omitted, Started: c.Started, Ended: c.Ended, Rest: c.Rest, AtPrompt: c.AtPrompt, Dropped: c.Dropped}
	}
	return r, nil
}

func (s *Service) Read(ctx context.Context, id string, wait time.Duration, budget int) (*terminals.Output, error) {
	owner, err := s.owner(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.M.ReadScreen(ctx, owner, id, wait, budget)
	if err != nil {
		return nil, hostError(err)
	}
	r := &terminals.Output{Session: SessionProto(out.Info), Data: out.Data, Dropped: out.Dropped, AtPrompt: out.AtPrompt}
	if out.HasScreen {
		r.Screen = ScreenProto(out.Screen)
	}
	return r, nil
}

// ScreenProto converts a look at a screen for the wire.
func ScreenProto(r screen.Read) *terminals.Screen {
	return &terminals.Screen{
		Viewport:               r.Viewport,
		ViewportOmittedLines:   int64(r.ViewportOmittedLines),
		ViewportOmittedChars:   int64(r.ViewportOmittedChars),
		Scrollback:             r.Unread.Text,
		ScrollbackLines:        int64(r.Unread.Lines),
		ScrollbackOmittedLines: int64(r.Unread.OmittedLines),
		ScrollbackOmittedChars: int64(r.Unread.OmittedChars),
		AltScreen:              r.AltScreen,
		CursorRow:              uint32(max(r.CursorRow, 0)),
		CursorCol:              uint32(max(r.CursorCol, 0)),
		Title:                  r.Title,
	}
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
