package tools

import (
	"context"

	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Server serves a Registrar as dsh.tools.v1.Tools: the one place where the
// seam's errors become status codes.
type Server struct {
	toolsv1.UnimplementedToolsServer
	impl Registrar
}

// NewServer wraps an implementation for registering with a grpc.Server.
func NewServer(impl Registrar) *Server { return &Server{impl: impl} }

var _ toolsv1.ToolsServer = (*Server)(nil)

func (s *Server) Register(ctx context.Context, spec *ToolSpec) (*toolsv1.RegisterResponse, error) {
	if err := s.impl.Register(ctx, spec); err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &toolsv1.RegisterResponse{}, nil
}

func (s *Server) Unregister(ctx context.Context, req *toolsv1.UnregisterRequest) (*toolsv1.UnregisterResponse, error) {
	if err := s.impl.Unregister(ctx, req.Name); err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &toolsv1.UnregisterResponse{}, nil
}

// HandlerServer serves a Handler as dsh.tools.v1.ToolHandler.
type HandlerServer struct {
	toolsv1.UnimplementedToolHandlerServer
	impl Handler
}

// NewHandlerServer wraps a plugin's tools for registering with a
// grpc.Server.
func NewHandlerServer(impl Handler) *HandlerServer { return &HandlerServer{impl: impl} }

var _ toolsv1.ToolHandlerServer = (*HandlerServer)(nil)

func (s *HandlerServer) Call(ctx context.Context, req *CallRequest) (*CallResult, error) {
	r, err := s.impl.Call(ctx, req)
	return r, seam.ToStatus(err)
}
