package shell

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dshrun/dsh/plugins/shell/shellv1"
	"github.com/dshrun/dsh/sdk"
)

// twoCalls is an executor that predates Exec: only Resolve and Run.
type twoCalls struct {
	shellv1.UnimplementedShellServer
	resolves, runs atomic.Int32
}

func (e *twoCalls) Resolve(_ context.Context, req *ExecRequest) (*ExecSpec, error) {
	e.resolves.Add(1)
	return &ExecSpec{Command: req.Command, Workdir: "/resolved", TimeoutMs: 1234}, nil
}

func (e *twoCalls) Run(_ context.Context, spec *ExecSpec) (*RunResult, error) {
	e.runs.Add(1)
	code := int32(7)
	return &RunResult{ExitCode: &code, TimeoutMs: spec.TimeoutMs}, nil
}

func TestExecFallsBackToResolveAndRun(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "shell.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	exe := &twoCalls{}
	shellv1.RegisterShellServer(srv, exe)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := NewClient(conn, "")
	for i := 0; i < 3; i++ {
		res, err := c.Exec(context.Background(), &ExecRequest{Command: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == nil || *res.ExitCode != 7 || res.Workdir != "/resolved" || res.TimeoutMs != 1234 {
			t.Fatalf("result: %+v", res)
		}
	}
	if exe.resolves.Load() != 3 || exe.runs.Load() != 3 {
		t.Fatalf("resolves %d, runs %d; want 3 each", exe.resolves.Load(), exe.runs.Load())
	}
	if c.noExec.Load() == 0 {
		t.Error("the missing Exec was not remembered: every call pays a failed round trip")
	}
	// Nor does it say its limits: the caller assumes the defaults.
	lim, err := c.Limits(context.Background())
	if err != nil || lim.TimeoutMs != DefaultTimeoutMs || lim.MaxTimeoutMs != DefaultMaxTimeoutMs || lim.GraceMs != 3000 || lim.Workdir != "" {
		t.Fatalf("limits of an executor without them: %+v %v", lim, err)
	}
}

// unknownService answers every call as the host does when nobody serves
// the shell service: that is an error, not an executor without Exec.
func TestExecDoesNotFallBackWhenTheServiceIsUnknown(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "shell.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		return sdk.HostError(codes.Unimplemented, sdk.ReasonUnknownService, "no plugin in this composition serves dsh.shell.v1.Shell")
	}))
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := NewClient(conn, "")
	_, err = c.Exec(context.Background(), &ExecRequest{Command: "x"})
	if !errors.Is(sdk.FromRPC(err), sdk.ErrUnknownService) || c.noExec.Load() != 0 {
		t.Fatalf("exec on an unknown service: %v (noExec %d)", err, c.noExec.Load())
	}
	if l, err := c.Limits(context.Background()); !errors.Is(sdk.FromRPC(err), sdk.ErrUnknownService) {
		t.Fatalf("limits on an unknown service: %+v %v", l, err)
	}
}
