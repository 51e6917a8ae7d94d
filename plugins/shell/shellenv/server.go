package shellenv

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/plugins/shell/shellenv/shellenvv1"
	"github.com/dshrun/dsh/sdk"
)

// Server serves a Registry as dsh.shellenv.v1.ShellEnv. The owner of a
// registration is the calling plugin as the host names it (sdk.Caller).
type Server struct {
	shellenvv1.UnimplementedShellEnvServer
	Registry *Registry
}

var _ shellenvv1.ShellEnvServer = (*Server)(nil)

func (s *Server) Collect(context.Context, *shellenvv1.CollectRequest) (*shellenvv1.Snapshot, error) {
	snap := s.Registry.Collect()
	return &shellenvv1.Snapshot{Env: snap.Env, Generation: snap.Generation}, nil
}

func (s *Server) Register(ctx context.Context, req *shellenvv1.RegisterRequest) (*shellenvv1.RegisterResponse, error) {
	if err := s.Registry.Register(sdk.Caller(ctx), req.Name, req.Value); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &shellenvv1.RegisterResponse{}, nil
}

func (s *Server) Unregister(ctx context.Context, req *shellenvv1.UnregisterRequest) (*shellenvv1.UnregisterResponse, error) {
	if err := s.Registry.Unregister(sdk.Caller(ctx), req.Name); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &shellenvv1.UnregisterResponse{}, nil
}

func (s *Server) Watch(_ *shellenvv1.WatchRequest, stream grpc.ServerStreamingServer[shellenvv1.Snapshot]) error {
	for {
		snap, changed := s.Registry.Watch()
		if err := stream.Send(&shellenvv1.Snapshot{Env: snap.Env, Generation: snap.Generation}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (s *Server) List(context.Context, *shellenvv1.ListRequest) (*shellenvv1.ListResponse, error) {
	resp := &shellenvv1.ListResponse{}
	for _, f := range s.Registry.List() {
		resp.Facts = append(resp.Facts, &shellenvv1.Fact{Name: f.Name, Value: f.Value, Owner: f.Owner})
	}
	return resp, nil
}
