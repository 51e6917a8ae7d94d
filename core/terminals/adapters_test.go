package terminals

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/terminals/terminalsv1"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/sdk"
)

// fakeTerminals is a Terminals whose every call fails with the error named
// by its id (or name), or answers.
type fakeTerminals struct {
	fail   map[string]error
	wait   time.Duration
	budget int
}

func (f *fakeTerminals) err(key string) error { return f.fail[key] }

func (f *fakeTerminals) RegisterBackend(_ context.Context, name, dialect string) error {
	return f.err(name)
}
func (f *fakeTerminals) Open(_ context.Context, r *OpenRequest) (*Session, error) {
	if err := f.err(r.Name); err != nil {
		return nil, err
	}
	code := int32(0)
	return &Session{Id: "t1", Name: r.Name, Backend: r.Backend, Cwd: r.Cwd, Cols: r.Cols, Rows: r.Rows, Status: "exited", ExitCode: &code}, nil
}
func (f *fakeTerminals) Send(_ context.Context, r *SendRequest) (*Sent, error) {
	if err := f.err(r.Id); err != nil {
		return nil, err
	}
	return &Sent{Session: &Session{Id: r.Id, Name: r.Text + "|" + r.Signal}, Wait: WaitStdinRead, WaitDetail: "pid 1 bash", Screen: &Screen{Viewport: "$ ls"}}, nil
}
func (f *fakeTerminals) Read(_ context.Context, id string, wait time.Duration, budget int) (*Output, error) {
	if err := f.err(id); err != nil {
		return nil, err
	}
	f.wait, f.budget = wait, budget
	return &Output{Session: &Session{Id: id}, Data: []byte("hi\r\n$ "), Dropped: 3, AtPrompt: true, Screen: &Screen{Viewport: "hi\n$", ScrollbackOmittedLines: 4}}, nil
}
func (f *fakeTerminals) Signal(_ context.Context, id, sig string, tg Target) (*Signalled, error) {
	if err := f.err(id + sig); err != nil {
		return nil, err
	}
	return &Signalled{Delivered: tg == TargetShell, Session: &Session{Id: id}}, nil
}
func (f *fakeTerminals) Resize(_ context.Context, id string, c, r int) (*Session, error) {
	if err := f.err(id); err != nil {
		return nil, err
	}
	return &Session{Id: id, Cols: uint32(c), Rows: uint32(r)}, nil
}
func (f *fakeTerminals) Close(_ context.Context, id string) (*Session, error) {
	if err := f.err(id); err != nil {
		return nil, err
	}
	return &Session{Id: id, Status: "exited"}, nil
}
func (f *fakeTerminals) List(context.Context) ([]*Session, error) {
	if err := f.err("list"); err != nil {
		return nil, err
	}
	return []*Session{{Id: "t1"}, {Id: "t2"}}, nil
}

// Each kind of the taxonomy crosses the wire as its own code and comes
// back as itself, with the implementation's words and no transport's;
// another owner's session comes back as the sdk's refusal; results come
// back whole.
func TestAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	fake := &fakeTerminals{fail: map[string]error{}}
	conn := seamtest.Conn(t, func(s *grpc.Server) { terminalsv1.RegisterTerminalsServer(s, NewServer(fake)) })
	c, raw := NewClient(conn), terminalsv1.NewTerminalsClient(conn)

	codesSeen := map[codes.Code]error{}
	for _, kind := range []error{ErrNoSession, ErrDuplicateName, ErrDuplicateBackend, ErrNoBackend, ErrSendActive, ErrServiceDisposing, ErrOwnerNotLive, ErrTooMany, ErrInvalid} {
		msg := "the words of " + kind.Error()
		fake.fail["x"] = Errorf(kind, msg)
		_, err := c.Close(ctx, "x")
		if !errors.Is(err, kind) || err.Error() != msg {
			t.Errorf("%v came back as %v", kind, err)
		}
		_, rerr := raw.Close(ctx, &terminalsv1.SessionRef{Id: "x"})
		code := status.Code(rerr)
		if prev, ok := codesSeen[code]; ok {
			t.Errorf("%v and %v both travel as %v", prev, kind, code)
		}
		codesSeen[code] = kind
	}
	// The refused SIGKILL of a shell travels as an invalid request with its
	// reason: it comes back as itself, and as ErrInvalid.
	fake.fail["x"] = Errorf(ErrShellKill, "SIGKILL for the shell of session x is refused")
	if _, err := c.Close(ctx, "x"); !errors.Is(err, ErrShellKill) || !errors.Is(err, ErrInvalid) || err.Error() != "SIGKILL for the shell of session x is refused" {
		t.Errorf("the shell's SIGKILL came back as %v", err)
	}
	if _, rerr := raw.Close(ctx, &terminalsv1.SessionRef{Id: "x"}); status.Code(rerr) != codes.InvalidArgument {
		t.Errorf("the shell's SIGKILL travels as %v", status.Code(rerr))
	}
	fake.fail["x"] = Errorf(ErrInvalid, "SIGKILL9 is no signal")
	if _, err := c.Close(ctx, "x"); errors.Is(err, ErrShellKill) || !errors.Is(err, ErrInvalid) {
		t.Errorf("an invalid request that names SIGKILL came back as %v", err)
	}
	fake.fail["x"] = Errorf(ErrForeignSession, "session x is another owner's")
	if _, err := c.Close(ctx, "x"); !errors.Is(err, sdk.ErrPermissionDenied) || strings.Contains(err.Error(), "rpc error") {
		t.Errorf("another owner's session: %v", err)
	}
	if _, ok := codesSeen[codes.PermissionDenied]; ok {
		t.Error("a taxonomy kind travels as the code of a refusal")
	}
	// A host failure with a reason of its own keeps it, whatever its code
	// would mean here.
	fake.fail["x"] = sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, `plugin "term" is restarting`)
	if _, err := c.Close(ctx, "x"); !errors.Is(err, sdk.ErrProviderGone) || errors.Is(err, ErrServiceDisposing) || !strings.Contains(err.Error(), "restarting") {
		t.Errorf("a backend that is gone: %v", err)
	}
	fake.fail["bash"] = Errorf(ErrDuplicateBackend, `backend "bash" is registered by plugin a`)
	if err := c.RegisterBackend(ctx, "bash", "bash"); !errors.Is(err, ErrDuplicateBackend) {
		t.Errorf("register: %v", err)
	}
	if err := c.RegisterBackend(ctx, "pwsh", "pwsh"); err != nil {
		t.Errorf("register: %v", err)
	}
	if s, err := c.Open(ctx, &OpenRequest{Backend: "bash", Name: "main", Cwd: "/w", Cols: 90, Rows: 20}); err != nil || s.Id != "t1" || s.Name != "main" || s.Cwd != "/w" || s.Cols != 90 || s.ExitCode == nil {
		t.Errorf("open: %v %v", s, err)
	}
	if s, err := c.Send(ctx, &SendRequest{Id: "t1", Text: "ls", Submit: true, Signal: "SIGINT", WaitMs: 2000}); err != nil || s.Session.Name != "ls|SIGINT" || s.Wait != WaitStdinRead || s.WaitDetail != "pid 1 bash" || s.Screen.Viewport != "$ ls" {
		t.Errorf("send: %v %v", s, err)
	}
	if o, err := c.Read(ctx, "t1", 250*time.Millisecond, 500); err != nil || string(o.Data) != "hi\r\n$ " || o.Dropped != 3 || !o.AtPrompt || fake.wait != 250*time.Millisecond || fake.budget != 500 || o.Screen.ScrollbackOmittedLines != 4 {
		t.Errorf("read: %v %v (wait %v)", o, err, fake.wait)
	}
	if s, err := c.Signal(ctx, "t1", "SIGINT", TargetShell); err != nil || !s.Delivered {
		t.Errorf("signal: %v %v", s, err)
	}
	if s, err := c.Resize(ctx, "t1", 120, 40); err != nil || s.Cols != 120 || s.Rows != 40 {
		t.Errorf("resize: %v %v", s, err)
	}
	if l, err := c.List(ctx); err != nil || len(l) != 2 {
		t.Errorf("list: %v %v", l, err)
	}
	fake.fail["list"] = Errorf(sdk.ErrPermissionDenied, "terminals belong to an agent")
	if _, err := c.List(ctx); !errors.Is(err, sdk.ErrPermissionDenied) {
		t.Errorf("refused list: %v", err)
	}
}
