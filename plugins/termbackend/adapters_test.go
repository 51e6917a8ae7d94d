package termbackend

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/plugins/termbackend/terminalv1"
	"github.com/dshrun/dsh/sdk"
)

// fakeBackend is a Backend made of functions.
type fakeBackend struct {
	start func(context.Context, *StartRequest) (*Started, error)
	send  func(context.Context, *SendRequest) (bool, error)
}

func (f *fakeBackend) Start(ctx context.Context, r *StartRequest) (*Started, error) {
	return f.start(ctx, r)
}
func (f *fakeBackend) Send(ctx context.Context, r *SendRequest) (bool, error) { return f.send(ctx, r) }

// Each kind of error crosses the wire and comes back as itself; results
// come back whole.
func TestAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	fake := &fakeBackend{
		start: func(_ context.Context, r *StartRequest) (*Started, error) {
			if r.Cwd == "/nowhere" {
				return nil, CannotStart(errors.New("workdir /nowhere does not exist"))
			}
			return &Started{ProcessId: "p1", Pid: 7, Cwd: r.Cwd, Dialect: &Dialect{Name: "bash", Prompt: []byte("\x1b]133;A\a$ ")}}, nil
		},
		send: func(_ context.Context, r *SendRequest) (bool, error) {
			switch r.ProcessId {
			case "gone":
				return false, NotFound(errors.New(`no process "gone"`))
			case "late":
				return false, nil
			}
			return r.Submit && r.Text == "ls", nil
		},
	}
	c := NewClient(seamtest.Conn(t, func(s *grpc.Server) { terminalv1.RegisterBackendServer(s, NewServer(fake)) }))
	st, err := c.Start(ctx, &StartRequest{Session: "t1", Cwd: "/w", Cols: 80, Rows: 24})
	if err != nil || st.ProcessId != "p1" || st.Pid != 7 || st.Cwd != "/w" || st.Dialect.GetName() != "bash" || string(st.Dialect.GetPrompt()) != "\x1b]133;A\a$ " {
		t.Fatalf("start: %v %v", st, err)
	}
	if _, err := c.Start(ctx, &StartRequest{Cwd: "/nowhere"}); !errors.Is(err, ErrCannotStart) || err.Error() != "workdir /nowhere does not exist" {
		t.Errorf("cannot start: %v", err)
	}
	if ok, err := c.Send(ctx, &SendRequest{ProcessId: "p1", Text: "ls", Submit: true}); !ok || err != nil {
		t.Errorf("send: %v %v", ok, err)
	}
	if ok, err := c.Send(ctx, &SendRequest{ProcessId: "late"}); ok || err != nil {
		t.Errorf("send after the end: %v %v", ok, err)
	}
	if _, err := c.Send(ctx, &SendRequest{ProcessId: "gone"}); !errors.Is(err, ErrNotFound) || errors.Is(err, sdk.ErrProviderGone) {
		t.Errorf("send to no terminal: %v", err)
	}
}
