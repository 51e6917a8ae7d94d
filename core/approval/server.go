package approval

import (
	"context"

	"github.com/dshrun/dsh/core/approval/approvalv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Server serves an Approver as dsh.approval.v1.Approval: the one place
// where its errors become status codes.
type Server struct {
	approvalv1.UnimplementedApprovalServer
	impl Approver
}

// NewServer wraps an implementation for registering with a grpc.Server.
func NewServer(impl Approver) *Server { return &Server{impl: impl} }

var _ approvalv1.ApprovalServer = (*Server)(nil)

func (s *Server) Approve(ctx context.Context, req *Request) (*Decision, error) {
	d, err := s.impl.Approve(ctx, req)
	return d, seam.ToStatus(err)
}
