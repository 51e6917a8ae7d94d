package approval

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/approval/approvalv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/sdk"
)

type fakeApprover func(context.Context, *Request) (*Decision, error)

func (f fakeApprover) Approve(ctx context.Context, r *Request) (*Decision, error) { return f(ctx, r) }

func serve(t *testing.T, impl Approver) *Client {
	return NewClient(seamtest.Conn(t, func(s *grpc.Server) { approvalv1.RegisterApprovalServer(s, NewServer(impl)) }))
}

// The request and the decision cross whole; an error comes back in the
// sdk vocabulary, and Ask over the wire still fails closed.
func TestAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	var got *Request
	c := serve(t, fakeApprover(func(_ context.Context, r *Request) (*Decision, error) {
		got = r
		return &Decision{Approved: true, Reason: "allowed by approval rule 1", DecidedBy: ByPolicy}, nil
	}))
	req := &Request{Kind: KindSandboxEscalation, Tool: "bash", Command: "npm install", TargetMode: "workspace-write", Reason: "needs the network"}
	d, err := c.Approve(ctx, req)
	if err != nil || !d.Approved || d.DecidedBy != ByPolicy || got.Command != "npm install" || got.TargetMode != "workspace-write" || got.Reason != "needs the network" {
		t.Fatalf("approve: %v %v (got %v)", d, err, got)
	}
	refused := serve(t, fakeApprover(func(context.Context, *Request) (*Decision, error) {
		return nil, seam.New(sdk.ErrPermissionDenied, `plugin "x" did not declare inject "approval"`)
	}))
	if _, err := refused.Approve(ctx, req); !errors.Is(err, sdk.ErrPermissionDenied) || strings.Contains(err.Error(), "rpc error") {
		t.Fatalf("refused: %v", err)
	}
	if d := Ask(ctx, refused, req); d.Approved || d.DecidedBy != ByNone || !strings.Contains(d.Reason, "did not declare") {
		t.Fatalf("ask over a refusal: %+v", d)
	}
}
