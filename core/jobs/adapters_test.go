package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/sdk"
)

// fakeJobs is a Jobs made of functions, for the adapters.
type fakeJobs struct {
	register func(context.Context, *RegisterRequest) (*Job, error)
	read     func(context.Context, string) (*JobRead, error)
	kill     func(context.Context, string) (bool, error)
	list     func(context.Context) ([]*Job, error)
}

func (f *fakeJobs) Register(ctx context.Context, r *RegisterRequest) (*Job, error) {
	return f.register(ctx, r)
}
func (f *fakeJobs) Read(ctx context.Context, id string) (*JobRead, error) { return f.read(ctx, id) }
func (f *fakeJobs) Kill(ctx context.Context, id string) (bool, error)     { return f.kill(ctx, id) }
func (f *fakeJobs) List(ctx context.Context) ([]*Job, error)              { return f.list(ctx) }

func serveFake(t *testing.T, impl Jobs) *Client {
	return NewClient(seamtest.Conn(t, func(s *grpc.Server) { jobsv1.RegisterJobsServer(s, NewServer(impl)) }))
}

// Each kind of error crosses the wire and comes back as itself (another
// owner's job as the sdk's refusal), with the implementation's message and
// no transport words; results come back whole.
func TestAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	code := int32(2)
	fake := &fakeJobs{
		register: func(_ context.Context, r *RegisterRequest) (*Job, error) {
			if r.ProcessId == "many" {
				return nil, fmt.Errorf("%w: 16 jobs of %q are running (the cap)", ErrTooMany, "agent")
			}
			return &Job{Id: "j1", Command: r.Command}, nil
		},
		read: func(_ context.Context, id string) (*JobRead, error) {
			switch id {
			case "j9":
				return nil, fmt.Errorf("%w %q", ErrNotFound, id)
			case "theirs":
				return nil, fmt.Errorf("%w: %q", ErrForeign, id)
			case "away":
				// As the executor's client hands it on: in the sdk vocabulary.
				return nil, sdk.FromRPC(sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, `plugin "bash" is restarting`))
			}
			return &JobRead{Job: &Job{Id: id, Status: "completed", ExitCode: &code}, Stdout: []byte("out"), StdoutFacts: &Collected{Total: 3}}, nil
		},
		kill: func(context.Context, string) (bool, error) {
			return false, seam.New(context.Canceled, "the call was cancelled")
		},
		list: func(context.Context) ([]*Job, error) {
			return nil, seam.New(sdk.ErrPermissionDenied, "jobs belong to an agent")
		},
	}
	c := serveFake(t, fake)
	noTransport := func(err error) {
		t.Helper()
		if strings.Contains(err.Error(), "rpc error") || strings.Contains(err.Error(), "code =") {
			t.Errorf("transport words in %q", err)
		}
	}
	if j, err := c.Register(ctx, &RegisterRequest{ProcessId: "p1", Command: "make", ShellKey: "shell"}); err != nil || j.Id != "j1" || j.Command != "make" {
		t.Fatalf("register: %v %v", j, err)
	}
	_, err := c.Register(ctx, &RegisterRequest{ProcessId: "many"})
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "the cap") {
		t.Fatalf("over the cap: %v", err)
	}
	noTransport(err)
	if r, err := c.Read(ctx, "j1"); err != nil || string(r.Stdout) != "out" || r.Job.GetExitCode() != 2 || r.StdoutFacts.GetTotal() != 3 {
		t.Fatalf("read: %v %v", r, err)
	}
	if _, err := c.Read(ctx, "j9"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"j9"`) {
		t.Fatalf("unknown job: %v", err)
	}
	_, err = c.Read(ctx, "theirs")
	if !errors.Is(err, sdk.ErrPermissionDenied) || !strings.Contains(err.Error(), "another owner") {
		t.Fatalf("another owner's job: %v", err)
	}
	noTransport(err)
	if _, err := c.Read(ctx, "away"); !errors.Is(err, sdk.ErrProviderGone) || !strings.Contains(err.Error(), "restarting") {
		t.Fatalf("executor away: %v", err)
	}
	var e *sdk.Error
	if _, err := c.Kill(ctx, "j1"); !errors.As(err, &e) || e.Code != codes.Canceled || e.Msg != "the call was cancelled" {
		t.Fatalf("cancelled kill: %v", err)
	}
	if _, err := c.List(ctx); !errors.Is(err, sdk.ErrPermissionDenied) || errors.Is(err, ErrForeign) {
		t.Fatalf("refused list: %v", err)
	}
}
