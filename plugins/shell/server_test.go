package shell

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/plugins/shell/shellv1"
	"github.com/dshrun/dsh/sdk"
)

// fakeExecutor is an Executor made of functions, for the adapters.
type fakeExecutor struct {
	resolve func(context.Context, *ExecRequest) (*ExecSpec, error)
	run     func(context.Context, *ExecSpec) (*RunResult, error)
	start   func(context.Context, *ExecSpec) (*Started, error)
	kill    func(context.Context, string) (bool, error)
	limits  func(context.Context) (*Limits, error)
}

func (f *fakeExecutor) Resolve(ctx context.Context, r *ExecRequest) (*ExecSpec, error) {
	return f.resolve(ctx, r)
}
func (f *fakeExecutor) Run(ctx context.Context, s *ExecSpec) (*RunResult, error) {
	return f.run(ctx, s)
}
func (f *fakeExecutor) Exec(ctx context.Context, r *ExecRequest) (*RunResult, error) {
	s, err := f.resolve(ctx, r)
	if err != nil {
		return nil, err
	}
	return f.run(ctx, s)
}
func (f *fakeExecutor) Start(ctx context.Context, s *ExecSpec) (*Started, error) {
	return f.start(ctx, s)
}
func (f *fakeExecutor) ReadOutput(context.Context, string) (*ProcessRead, error) {
	return &ProcessRead{Stdout: []byte("out")}, nil
}
func (f *fakeExecutor) Kill(ctx context.Context, id string) (bool, error) { return f.kill(ctx, id) }
func (f *fakeExecutor) Wait(context.Context, string) (*ProcessState, error) {
	return &ProcessState{Status: StatusCompleted}, nil
}

func (f *fakeExecutor) Limits(ctx context.Context) (*Limits, error) { return f.limits(ctx) }

// serveFake serves impl through NewServer and returns a Client on it.
func serveFake(t *testing.T, impl Executor) *Client {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "shell.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	shellv1.RegisterShellServer(srv, NewServer(impl))
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return NewClient(conn, "")
}

// The seam's errors cross the wire and come back as themselves, with the
// implementation's message and no transport words.
func TestAdaptersRoundTripErrors(t *testing.T) {
	ctx := context.Background()
	fake := &fakeExecutor{
		resolve: func(_ context.Context, r *ExecRequest) (*ExecSpec, error) {
			if r.Command == "" {
				return nil, Invalid("There is no command to run: the command is empty.")
			}
			return &ExecSpec{Command: r.Command, Workdir: "/w"}, nil
		},
		run: func(_ context.Context, s *ExecSpec) (*RunResult, error) {
			if s.Command == "nowhere" {
				return nil, CannotRun("workdir /nowhere: no such directory")
			}
			if s.Command == "deeper" {
				// An UNIMPLEMENTED from a call further down must not read
				// as "this executor has no Exec".
				return nil, status.Error(codes.Unimplemented, "unknown method Spawn")
			}
			code := int32(3)
			return &RunResult{ExitCode: &code, Workdir: s.Workdir}, nil
		},
		start: func(context.Context, *ExecSpec) (*Started, error) { return &Started{Id: "p1", Pid: 42}, nil },
		kill: func(_ context.Context, id string) (bool, error) {
			if id != "p1" {
				return false, sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, "plugin exited")
			}
			return true, nil
		},
		limits: func(context.Context) (*Limits, error) {
			return &Limits{Workdir: "/w", TimeoutMs: 5, MaxTimeoutMs: 7, GraceMs: 11}, nil
		},
	}
	c := serveFake(t, fake)
	var _ Executor = c

	if _, err := c.Resolve(ctx, &ExecRequest{}); !errors.Is(err, ErrInvalid) || err.Error() != "There is no command to run: the command is empty." {
		t.Errorf("invalid: %v", err)
	}
	if _, err := c.Exec(ctx, &ExecRequest{Command: "nowhere"}); !errors.Is(err, ErrCannotRun) || err.Error() != "workdir /nowhere: no such directory" {
		t.Errorf("cannot run: %v", err)
	}
	if _, err := c.Exec(ctx, &ExecRequest{Command: "deeper"}); err == nil || errors.Is(sdk.FromRPC(err), sdk.ErrUnimplemented) || c.noExec.Load() != 0 {
		t.Errorf("an UNIMPLEMENTED from deeper down: %v (noExec %d)", err, c.noExec.Load())
	}
	r, err := c.Exec(ctx, &ExecRequest{Command: "x"})
	if err != nil || r.ExitCode == nil || *r.ExitCode != 3 || r.Workdir != "/w" {
		t.Errorf("exec: %+v %v", r, err)
	}
	p, err := c.StartProcess(ctx, &ExecSpec{Command: "x"})
	if err != nil || p.ID != "p1" || p.Pid != 42 {
		t.Fatalf("start: %+v %v", p, err)
	}
	if killed, err := p.Kill(ctx); !killed || err != nil {
		t.Errorf("kill: %v %v", killed, err)
	}
	if _, err := c.Kill(ctx, "p2"); !errors.Is(err, sdk.ErrProviderGone) {
		t.Errorf("kill through a gone provider: %v", err)
	}
	if rd, err := p.ReadOutput(ctx); err != nil || string(rd.Stdout) != "out" {
		t.Errorf("read: %+v %v", rd, err)
	}
	if st, err := p.Wait(ctx); err != nil || st.Status != StatusCompleted {
		t.Errorf("wait: %+v %v", st, err)
	}
	if l, err := c.Limits(ctx); err != nil || l.Workdir != "/w" || l.TimeoutMs != 5 || l.MaxTimeoutMs != 7 || l.GraceMs != 11 {
		t.Errorf("limits: %+v %v", l, err)
	}
}
