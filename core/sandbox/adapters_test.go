package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/sandbox/sandboxv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/sdk"
)

type fakePolicies struct {
	get func(context.Context) (*Policy, error)
}

func (f fakePolicies) Get(ctx context.Context) (*Policy, error) { return f.get(ctx) }

func serve(t *testing.T, impl Policies) *Client {
	return NewClient(seamtest.Conn(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxPolicyServer(s, NewServer(impl)) }))
}

// The policy comes back whole, and each kind of error as itself with the
// implementation's words.
func TestAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	want := &Policy{DefaultMode: WorkspaceWrite, WorkspaceRoot: "/w", WritableRoots: []string{"/c"}, ProtectedPaths: []string{"/w/.git/config"}, UnixSockets: []string{"/run/a.sock"}}
	if p, err := serve(t, fakePolicies{func(context.Context) (*Policy, error) { return want, nil }}).Get(ctx); err != nil ||
		p.DefaultMode != want.DefaultMode || p.WorkspaceRoot != "/w" || p.WritableRoots[0] != "/c" || p.ProtectedPaths[0] != "/w/.git/config" || p.UnixSockets[0] != "/run/a.sock" || p.Network {
		t.Fatalf("get: %v %v", p, err)
	}
	none := serve(t, fakePolicies{func(context.Context) (*Policy, error) {
		return nil, seam.New(ErrNoPolicy, "the composition has no sandbox section")
	}})
	if _, err := none.Get(ctx); !errors.Is(err, ErrNoPolicy) || err.Error() != "the composition has no sandbox section" {
		t.Fatalf("no policy: %v", err)
	}
	refused := serve(t, fakePolicies{func(context.Context) (*Policy, error) {
		return nil, seam.New(sdk.ErrPermissionDenied, `plugin "x" did not declare inject "sandboxPolicy"`)
	}})
	if _, err := refused.Get(ctx); !errors.Is(err, sdk.ErrPermissionDenied) || errors.Is(err, ErrNoPolicy) || strings.Contains(err.Error(), "rpc error") {
		t.Fatalf("refused: %v", err)
	}
}
