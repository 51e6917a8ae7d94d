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

func (s *Server) Intercept(ctx context.Context, in *Interception) (*toolsv1.InterceptResponse, error) {
	if err := s.impl.Intercept(ctx, in); err != nil {
		return nil, seam.ToStatus(err, kinds...)
	}
	return &toolsv1.InterceptResponse{}, nil
}

// InterceptorServer serves an Interceptor as dsh.tools.v1.ToolInterceptor.
type InterceptorServer struct {
	toolsv1.UnimplementedToolInterceptorServer
	impl Interceptor
}

// NewInterceptorServer wraps a plugin's interceptor for registering with a
// grpc.Server.
func NewInterceptorServer(impl Interceptor) *InterceptorServer { return &InterceptorServer{impl: impl} }

var _ toolsv1.ToolInterceptorServer = (*InterceptorServer)(nil)

func (s *InterceptorServer) Before(ctx context.Context, req *BeforeCall) (*BeforeDecision, error) {
	r, err := s.impl.Before(ctx, req)
	return r, seam.ToStatus(err)
}

func (s *InterceptorServer) After(ctx context.Context, req *AfterCall) (*AfterFeedback, error) {
	r, err := s.impl.After(ctx, req)
	return r, seam.ToStatus(err)
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
