package shellenv

import (
	"context"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
)

// Server serves an Env as dsh.shellenv.v1.ShellEnv: the one place where
// the seam's errors become status codes.
type Server struct {
	shellenvv1.UnimplementedShellEnvServer
	impl Env
}

// NewServer wraps an implementation for Register(*grpc.Server).
func NewServer(impl Env) *Server { return &Server{impl: impl} }

var _ shellenvv1.ShellEnvServer = (*Server)(nil)

func (s *Server) Collect(ctx context.Context, _ *shellenvv1.CollectRequest) (*shellenvv1.Snapshot, error) {
	snap, err := s.impl.Collect(ctx)
	if err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return snapshotProto(snap), nil
}

func (s *Server) Register(ctx context.Context, req *shellenvv1.RegisterRequest) (*shellenvv1.RegisterResponse, error) {
	if err := s.impl.Register(ctx, req.Name, req.Value); err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &shellenvv1.RegisterResponse{}, nil
}

func (s *Server) Unregister(ctx context.Context, req *shellenvv1.UnregisterRequest) (*shellenvv1.UnregisterResponse, error) {
	if err := s.impl.Unregister(ctx, req.Name); err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &shellenvv1.UnregisterResponse{}, nil
}

func (s *Server) List(ctx context.Context, _ *shellenvv1.ListRequest) (*shellenvv1.ListResponse, error) {
	facts, err := s.impl.List(ctx)
	if err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	resp := &shellenvv1.ListResponse{}
	for _, f := range facts {
		resp.Facts = append(resp.Facts, &shellenvv1.Fact{Name: f.Name, Value: f.Value, Owner: f.Owner})
	}
	return resp, nil
}

func (s *Server) Watch(_ *shellenvv1.WatchRequest, stream grpc.ServerStreamingServer[shellenvv1.Snapshot]) error {
	return seam.ToStatus(s.impl.Watch(stream.Context(), func(snap Snapshot) error {
		return stream.Send(snapshotProto(snap))
	}), kinds...)
}
