package termbackend

import (
	"context"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/plugins/termbackend/terminalv1"
)

// Server serves a Backend as dsh.terminal.v1.Backend: the one place where
// the seam's errors become status codes.
type Server struct {
	terminalv1.UnimplementedBackendServer
	impl Backend
}

// NewServer wraps an implementation for registering with a grpc.Server.
func NewServer(impl Backend) *Server { return &Server{impl: impl} }

var _ terminalv1.BackendServer = (*Server)(nil)

func (s *Server) Start(ctx context.Context, req *StartRequest) (*Started, error) {
	r, err := s.impl.Start(ctx, req)
	return r, seam.ToStatus(err, kinds...)
}

func (s *Server) Send(ctx context.Context, req *SendRequest) (*terminalv1.Sent, error) {
	written, err := s.impl.Send(ctx, req)
	if err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &terminalv1.Sent{Written: written}, nil
}
