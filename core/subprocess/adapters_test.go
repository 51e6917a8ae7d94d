package subprocess

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/sdk"
)

// fakeProcesses is a Processes made of functions, for the adapters.
type fakeProcesses struct {
	run   func(context.Context, *SpawnRequest) (*Result, error)
	start func(context.Context, *SpawnRequest) (*Started, error)
	read  func(context.Context, string) (*ReadResult, error)
	kill  func(context.Context, string) (bool, error)
	wait  func(context.Context, string) (*Result, error)
}

func (f *fakeProcesses) Run(ctx context.Context, r *SpawnRequest) (*Result, error) {
	return f.run(ctx, r)
}
func (f *fakeProcesses) Start(ctx context.Context, r *SpawnRequest) (*Started, error) {
	return f.start(ctx, r)
}
func (f *fakeProcesses) Read(ctx context.Context, id string) (*ReadResult, error) {
	return f.read(ctx, id)
}
func (f *fakeProcesses) Kill(ctx context.Context, id string) (bool, error) { return f.kill(ctx, id) }
func (f *fakeProcesses) Wait(ctx context.Context, id string) (*Result, error) {
	return f.wait(ctx, id)
}

// serveFake serves impl through NewServer and returns a Client on it.
func serveFake(t *testing.T, impl Processes) *Client {
	return NewClient(seamtest.Conn(t, func(s *grpc.Server) { subprocessv1.RegisterSubprocessServer(s, NewServer(impl)) }))
}

// Each kind of error crosses the wire and comes back as itself, with the
// implementation's message and no transport words; results come back
// whole.
func TestAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	code := int32(3)
	fake := &fakeProcesses{
		run: func(_ context.Context, r *SpawnRequest) (*Result, error) {
			if r.Dir == "/nowhere" {
				return nil, CannotStart(errors.New(`subprocess workdir "bash": /nowhere: no such file or directory`))
			}
			return &Result{Status: subprocessv1.Status_STATUS_COMPLETED, ExitCode: &code, Stdout: &Collected{Data: []byte("out")}}, nil
		},
		start: func(context.Context, *SpawnRequest) (*Started, error) {
			return nil, seam.New(context.Canceled, "run: the call was already cancelled")
		},
		read: func(_ context.Context, id string) (*ReadResult, error) {
			if id != "p1" {
				return nil, NotFound(errors.New(`process "` + id + `" belongs to another owner`))
			}
			return &ReadResult{Stdout: &Collected{Data: []byte("new")}, Lossy: true}, nil
		},
		kill: func(_ context.Context, id string) (bool, error) {
			if id == "gone" {
				return false, sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, "the host is stopping")
			}
			return id == "p1", nil
		},
		wait: func(ctx context.Context, _ string) (*Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}
	c := serveFake(t, fake)

	if r, err := c.Run(ctx, &SpawnRequest{Argv: []string{"true"}}); err != nil || *r.ExitCode != 3 || string(r.Stdout.Data) != "out" {
		t.Errorf("run: %+v %v", r, err)
	}
	_, err := c.Run(ctx, &SpawnRequest{Argv: []string{"bash"}, Dir: "/nowhere"})
	if !errors.Is(err, ErrCannotStart) || err.Error() != `subprocess workdir "bash": /nowhere: no such file or directory` {
		t.Errorf("cannot start: %v", err)
	}
	if _, err := c.Read(ctx, "p2"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrCannotStart) || err.Error() != `process "p2" belongs to another owner` {
		t.Errorf("not found: %v", err)
	}
	if r, err := c.Read(ctx, "p1"); err != nil || string(r.Stdout.Data) != "new" || !r.Lossy {
		t.Errorf("read: %+v %v", r, err)
	}
	if killed, err := c.Kill(ctx, "p1"); !killed || err != nil {
		t.Errorf("kill: %v %v", killed, err)
	}
	if killed, err := c.Kill(ctx, "p9"); killed || err != nil {
		t.Errorf("kill of a finished process: %v %v", killed, err)
	}
	if _, err := c.Kill(ctx, "gone"); !errors.Is(err, sdk.ErrProviderGone) || err.Error() != "subprocess kill gone: the host is stopping" {
		t.Errorf("kill through a stopping host: %v", err)
	}
	var e *sdk.Error
	if _, err := c.Start(ctx, &SpawnRequest{}); !errors.As(err, &e) || e.Code != codes.Canceled || e.Msg != "run: the call was already cancelled" {
		t.Errorf("cancelled: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(wctx, "p1"); !errors.Is(err, sdk.ErrDeadline) {
		t.Errorf("wait past its deadline: %v", err)
	}
}
