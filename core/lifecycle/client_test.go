package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/sdk"
)

// fakePlugin serves Lifecycle with what its fields say; a nil field is a
// method the plugin does not implement.
type fakePlugin struct {
	pluginv1.UnimplementedLifecycleServer
	apply   func(*ApplyRequest) (*ApplyResponse, error)
	check   func(*CheckRequest) error
	release func(caller string) error
	dispose error
}

func (f *fakePlugin) Describe(context.Context, *pluginv1.DescribeRequest) (*Description, error) {
	return &Description{Name: "fake", Provides: []*Provide{{Key: "shell", CallerState: true}}, Inject: []*Inject{{Key: "jobs", Optional: true}}}, nil
}

func (f *fakePlugin) Apply(_ context.Context, req *ApplyRequest) (*ApplyResponse, error) {
	return f.apply(req)
}

func (f *fakePlugin) Check(ctx context.Context, req *CheckRequest) (*pluginv1.CheckResponse, error) {
	if f.check == nil {
		return f.UnimplementedLifecycleServer.Check(ctx, req)
	}
	return &pluginv1.CheckResponse{}, f.check(req)
}

func (f *fakePlugin) Dispose(context.Context, *pluginv1.DisposeRequest) (*pluginv1.DisposeResponse, error) {
	return &pluginv1.DisposeResponse{}, f.dispose
}

func (f *fakePlugin) Health(context.Context, *pluginv1.HealthRequest) (*HealthResponse, error) {
	return &HealthResponse{Ok: true, Detail: "fine"}, nil
}

func (f *fakePlugin) Release(_ context.Context, req *pluginv1.ReleaseRequest) (*pluginv1.ReleaseResponse, error) {
	return &pluginv1.ReleaseResponse{}, f.release(req.Caller)
}

func serve(t *testing.T, f *fakePlugin) *Client {
	return NewClient(seamtest.Conn(t, func(s *grpc.Server) { pluginv1.RegisterLifecycleServer(s, f) }))
}

// Every call crosses whole; a plugin's refusal comes back in its own
// words and the sdk vocabulary, without the transport's.
func TestClientRoundTrip(t *testing.T) {
	ctx := context.Background()
	var applied *ApplyRequest
	var released string
	c := serve(t, &fakePlugin{
		apply: func(req *ApplyRequest) (*ApplyResponse, error) {
			applied = req
			return &ApplyResponse{Facts: map[string]*Facts{"shell": {Values: map[string]string{"sandboxMode": "read-only"}}}}, nil
		},
		check: func(req *CheckRequest) error {
			return status.Error(codes.InvalidArgument, "config of "+req.Id+": no such file")
		},
		release: func(caller string) error { released = caller; return nil },
		dispose: status.Error(codes.PermissionDenied, "not now"),
	})
	d, err := c.Describe(ctx)
	if err != nil || d.Name != "fake" || len(d.Provides) != 1 || !d.Provides[0].CallerState || len(d.Inject) != 1 || !d.Inject[0].Optional {
		t.Fatalf("describe: %v %v", d, err)
	}
	r, err := c.Apply(ctx, &ApplyRequest{Id: "bash", ConfigJson: []byte(`{"a":1}`), HostBrokerId: 7, RuntimeDir: "/run/x"})
	if err != nil || r.Facts["shell"].Values["sandboxMode"] != "read-only" {
		t.Fatalf("apply: %v %v", r, err)
	}
	if applied.Id != "bash" || string(applied.ConfigJson) != `{"a":1}` || applied.HostBrokerId != 7 || applied.RuntimeDir != "/run/x" {
		t.Fatalf("apply sent %v", applied)
	}
	if err := c.Check(ctx, &CheckRequest{Id: "bash"}); err == nil || err.Error() != "config of bash: no such file" {
		t.Fatalf("check: %v", err)
	}
	if err := c.Dispose(ctx); !errors.Is(err, sdk.ErrPermissionDenied) || err.Error() != "not now" {
		t.Fatalf("dispose: %v", err)
	}
	if h, err := c.Health(ctx); err != nil || !h.Ok || h.Detail != "fine" {
		t.Fatalf("health: %v %v", h, err)
	}
	if err := c.Release(ctx, "tools"); err != nil || released != "tools" {
		t.Fatalf("release: %v, released %q", err, released)
	}
}

// A plugin without Check has nothing to check beyond its config schema;
// one whose Apply fails says why, and one that is gone reads as gone.
func TestClientMissingCheckAndFailures(t *testing.T) {
	ctx := context.Background()
	c := serve(t, &fakePlugin{
		apply:   func(*ApplyRequest) (*ApplyResponse, error) { return nil, errors.New("bad config") },
		release: func(string) error { return status.Error(codes.Unavailable, "connection closed") },
	})
	if err := c.Check(ctx, &CheckRequest{Id: "x"}); err != nil {
		t.Fatalf("check of a plugin without it: %v", err)
	}
	if _, err := c.Apply(ctx, &ApplyRequest{}); err == nil || err.Error() != "bad config" || strings.Contains(err.Error(), "rpc error") {
		t.Fatalf("apply: %v", err)
	}
	if err := c.Release(ctx, "x"); !errors.Is(err, sdk.ErrProviderGone) {
		t.Fatalf("release of a gone provider: %v", err)
	}
}
