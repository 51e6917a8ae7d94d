//go:build linux

package procs

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/internal/seam/seamtest"
)

type ownerKey struct{}

// The host's ctx.subprocess as a plugin reaches it: the owner comes from
// the context (the host's stamp) or is the plugin, whatever the request
// names, and each failure travels as the code the contract gives it.
func TestServerStampsOwnersAndCodes(t *testing.T) {
	m := newManager(t)
	stamp := grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(context.WithValue(ctx, ownerKey{}, "agent"), req)
	})
	conn := seamtest.Conn(t, func(s *grpc.Server) {
		subprocessv1.RegisterSubprocessServer(s, subprocess.NewServer(&Service{M: m, Caller: "bash", Serving: func(ctx context.Context) (seam.Served, bool) {
			o, ok := ctx.Value(ownerKey{}).(string)
			return seam.Served{Owner: o}, ok
		}}))
	}, stamp)
	raw, c := subprocessv1.NewSubprocessClient(conn), subprocess.NewClient(conn)
	ctx := context.Background()

	st, err := c.Start(ctx, &subprocess.SpawnRequest{Argv: []string{"sleep", "30"}, Dir: t.TempDir(), Owner: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := m.Get("agent", st.Id); err != nil || p.Owner() != "agent" {
		t.Fatalf("owner of the started process: %v %v", p, err)
	}
	// Another owner's process is not there for this caller.
	other, err := m.Spawn(Spec{Argv: []string{"sleep", "30"}, Dir: t.TempDir(), Owner: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Kill()
	if _, err := raw.Kill(ctx, &subprocessv1.ProcessRef{Id: other.ID}); status.Code(err) != codes.NotFound {
		t.Errorf("kill of another owner's process: %v", err)
	}
	if _, err := c.Read(ctx, other.ID); !errors.Is(err, subprocess.ErrNotFound) {
		t.Errorf("read of another owner's process: %v", err)
	}
	if killed, err := c.Kill(ctx, st.Id); !killed || err != nil {
		t.Errorf("kill: %v %v", killed, err)
	}
	if r, err := c.Wait(ctx, st.Id); err != nil || r.Status != subprocessv1.Status_STATUS_KILLED {
		t.Errorf("wait: %+v %v", r, err)
	}

	bad := &subprocess.SpawnRequest{Argv: []string{"true"}, Dir: "/nonexistent/dir"}
	if _, err := raw.Run(ctx, bad); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("run in a missing directory: %v", err)
	}
	if _, err := c.Start(ctx, bad); !errors.Is(err, subprocess.ErrCannotStart) {
		t.Errorf("start in a missing directory: %v", err)
	}
	var se *Error
	if _, err := (&Service{M: m}).Start(ctx, bad); !errors.As(err, &se) || se.Op != "workdir" || !errors.Is(err, subprocess.ErrCannotStart) {
		t.Errorf("the Manager's error behind ErrCannotStart: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (&Service{M: m}).Run(cctx, &subprocess.SpawnRequest{Argv: []string{"true"}, Dir: t.TempDir()}); !errors.Is(err, context.Canceled) {
		t.Errorf("run of a cancelled call: %v", err)
	}
}

// Whom a request serves is found once for it, owner and call together;
// and Start applies no timeout, whatever the request names (an executor
// passes its resolved spec on as it is).
func TestServerFindsWhomOnceAndStartHasNoTimeout(t *testing.T) {
	m := newManager(t)
	var asked atomic.Int32
	svc := &Service{M: m, Caller: "bash", Serving: func(context.Context) (seam.Served, bool) {
		asked.Add(1)
		return seam.Served{Owner: "agent", Call: "c1"}, true
	}}
	ctx := context.Background()
	st, err := svc.Start(ctx, &subprocess.SpawnRequest{Argv: []string{"sleep", "0.3"}, Dir: t.TempDir(), TimeoutMs: 50, GraceMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("a start asked whom it serves %d times", n)
	}
	p, err := m.Get("agent", st.Id)
	if err != nil || p.spec.Call != "c1" {
		t.Fatalf("the started process: %v %v", p, err)
	}
	r, err := svc.Wait(ctx, st.Id)
	if err != nil || r.Status != subprocessv1.Status_STATUS_COMPLETED || r.GetExitCode() != 0 {
		t.Fatalf("a background process was stopped at the 50ms its request named: %+v %v", r, err)
	}
}
