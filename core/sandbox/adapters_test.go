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
	want := &Policy{DefaultMode: WorkspaceWrite, WorkspaceRoot: "/w", WritableRoots: []string{"/c"}, CacheRoots: []string{"/h/.npm"}, ProtectedPaths: []string{"/w/.git/config"}, UnixSockets: []string{"/run/a.sock"}}
	if p, err := serve(t, fakePolicies{func(context.Context) (*Policy, error) { return want, nil }}).Get(ctx); err != nil ||
		p.DefaultMode != want.DefaultMode || p.WorkspaceRoot != "/w" || p.WritableRoots[0] != "/c" || len(p.CacheRoots) != 1 || p.CacheRoots[0] != "/h/.npm" || p.ProtectedPaths[0] != "/w/.git/config" || p.UnixSockets[0] != "/run/a.sock" || p.Network {
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

type fakeRunner func(context.Context, *WrapRequest) (*Wrapped, error)

func (f fakeRunner) Wrap(ctx context.Context, req *WrapRequest) (*Wrapped, error) { return f(ctx, req) }

// Settle says it undid the path the token names.
func (f fakeRunner) Settle(_ context.Context, req *SettleRequest) (*Settled, error) {
	if req.Settle == "" {
		return nil, seam.New(ErrUnavailable, "no watch to settle")
	}
	return &Settled{Undone: []*Undone{{Path: req.Settle, Why: "a new .git"}}}, nil
}

func serveRunner(t *testing.T, impl Sandboxes) *RunnerClient {
	return NewRunnerClient(seamtest.Conn(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServer(s, NewRunnerServer(impl)) }))
}

// Wrap's request and answer cross whole; an unavailable runner comes back
// as ErrUnavailable with its words, nothing else does.
func TestRunnerAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := serveRunner(t, fakeRunner(func(_ context.Context, req *WrapRequest) (*Wrapped, error) {
		if req.Mode == ReadOnly {
			return nil, seam.New(ErrUnavailable, "landlock (ABI 6) is not available: function not implemented")
		}
		return &Wrapped{Argv: append([]string{"bwrap", "--"}, req.Argv...), Runner: RunnerBubblewrap, Enforcement: "bubblewrap"}, nil
	}))
	w, err := c.Wrap(ctx, &WrapRequest{Argv: []string{"bash", "-c", "true"}, Mode: WorkspaceWrite, Policy: &Policy{WorkspaceRoot: "/w"}})
	if err != nil || strings.Join(w.Argv, " ") != "bwrap -- bash -c true" || w.Runner != RunnerBubblewrap || w.Confinement != "" {
		t.Fatalf("wrap: %v %v", w, err)
	}
	_, err = c.Wrap(ctx, &WrapRequest{Argv: []string{"true"}, Mode: ReadOnly})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoPolicy) || err.Error() != "landlock (ABI 6) is not available: function not implemented" {
		t.Fatalf("unavailable: %v", err)
	}
	st, err := c.Settle(ctx, &SettleRequest{Settle: "/w/sub/.git"})
	if err != nil || len(st.Undone) != 1 || st.Undone[0].Path != "/w/sub/.git" || st.Undone[0].Why != "a new .git" {
		t.Fatalf("settle: %v %v", st, err)
	}
	if _, err := c.Settle(ctx, &SettleRequest{}); !errors.Is(err, ErrUnavailable) || err.Error() != "no watch to settle" {
		t.Fatalf("settle unavailable: %v", err)
	}
	broken := serveRunner(t, fakeRunner(func(context.Context, *WrapRequest) (*Wrapped, error) { return nil, errors.New("boom") }))
	if _, err := broken.Wrap(ctx, &WrapRequest{}); errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("another error: %v", err)
	}
}
