package tools

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/sdk"
)

// fakeRegistrar is a Registrar made of functions, for the adapters.
type fakeRegistrar struct {
	register   func(context.Context, *ToolSpec) error
	unregister func(context.Context, string) error
	intercept  func(context.Context, *Interception) error
}

func (f *fakeRegistrar) Register(ctx context.Context, s *ToolSpec) error { return f.register(ctx, s) }
func (f *fakeRegistrar) Unregister(ctx context.Context, n string) error  { return f.unregister(ctx, n) }
func (f *fakeRegistrar) Intercept(ctx context.Context, in *Interception) error {
	return f.intercept(ctx, in)
}

// fakeInterceptor is an Interceptor made of functions.
type fakeInterceptor struct {
	before func(context.Context, *BeforeCall) (*BeforeDecision, error)
	after  func(context.Context, *AfterCall) (*AfterFeedback, error)
}

func (f fakeInterceptor) Before(ctx context.Context, r *BeforeCall) (*BeforeDecision, error) {
	return f.before(ctx, r)
}
func (f fakeInterceptor) After(ctx context.Context, r *AfterCall) (*AfterFeedback, error) {
	return f.after(ctx, r)
}

// fakeHandler is a Handler made of a function.
type fakeHandler func(context.Context, *CallRequest) (*CallResult, error)

func (f fakeHandler) Call(ctx context.Context, r *CallRequest) (*CallResult, error) { return f(ctx, r) }

// serve serves the adapters of reg and h and returns a connection to them.
func serve(t *testing.T, reg Registrar, h Handler) *grpc.ClientConn {
	return seamtest.Conn(t, func(s *grpc.Server) {
		toolsv1.RegisterToolsServer(s, NewServer(reg))
		toolsv1.RegisterToolHandlerServer(s, NewHandlerServer(h))
	})
}

// Each kind of error crosses the wire and comes back as itself, with the
// implementation's message and no transport words.
func TestAdaptersRoundTripErrors(t *testing.T) {
	ctx := context.Background()
	byName := map[string]error{
		"bad name":  Invalid(`tool name "bad name": use 1 to 64 letters, digits, '_' or '-'`),
		"bash":      Taken(`tool "bash" is already registered by plugin "a"; plugin "b" cannot register it`),
		"late":      CannotRegister(`tool "late": the scope is closing`),
		"sneaky":    seam.New(sdk.ErrPermissionDenied, `plugin "b" did not declare tool "sneaky"`),
		"exploding": errors.New("out of memory"),
	}
	var registered []string
	reg := &fakeRegistrar{
		register: func(_ context.Context, s *ToolSpec) error {
			if err, ok := byName[s.Name]; ok {
				return err
			}
			registered = append(registered, s.Name)
			return nil
		},
		unregister: func(_ context.Context, name string) error {
			return NotRegistered(`tool "` + name + `" is not registered by plugin "b"`)
		},
	}
	conn := serve(t, reg, fakeHandler(func(context.Context, *CallRequest) (*CallResult, error) { return nil, nil }))
	c := NewClient(conn)
	var _ Registrar = c

	for name, want := range map[string]error{"bad name": ErrInvalid, "bash": ErrTaken, "late": ErrCannotRegister} {
		err := c.Register(ctx, &ToolSpec{Name: name})
		if !errors.Is(err, want) || err.Error() != byName[name].Error() {
			t.Errorf("register %q: %v, want %v saying %q", name, err, want, byName[name])
		}
	}
	if err := c.Register(ctx, &ToolSpec{Name: "sneaky"}); !errors.Is(err, sdk.ErrPermissionDenied) || err.Error() != `register tool "sneaky": plugin "b" did not declare tool "sneaky"` {
		t.Errorf("undeclared: %v", err)
	}
	if err := c.Register(ctx, &ToolSpec{Name: "exploding"}); err == nil || errors.Is(err, ErrInvalid) || err.Error() != `register tool "exploding": out of memory` {
		t.Errorf("an error of no kind: %v", err)
	}
	if err := c.Unregister(ctx, "x"); !errors.Is(err, ErrNotRegistered) || err.Error() != `tool "x" is not registered by plugin "b"` {
		t.Errorf("unregister: %v", err)
	}
	if err := Register(ctx, conn, &ToolSpec{Name: "one"}, &ToolSpec{Name: "bash"}, &ToolSpec{Name: "two"}); !errors.Is(err, ErrTaken) || len(registered) != 1 || registered[0] != "one" {
		t.Errorf("Register stops at the first refusal: %v, registered %v", err, registered)
	}
}

// A tool call and its failures cross the wire whole.
func TestHandlerAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	h := fakeHandler(func(_ context.Context, r *CallRequest) (*CallResult, error) {
		switch r.Name {
		case "gone":
			return nil, sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, `plugin "bash" exited while the call was running`)
		case "broken":
			return nil, errors.New("the tool broke")
		}
		return &CallResult{Text: r.Owner + ":" + string(r.Arguments), IsError: true, Resources: []*Resource{{Path: "/p", Complete: true}}}, nil
	})
	c := NewHandlerClient(serve(t, &fakeRegistrar{}, h))
	var _ Handler = c

	r, err := c.Call(ctx, &CallRequest{Name: "bash", Owner: "agent", Arguments: []byte(`{}`)})
	if err != nil || r.Text != "agent:{}" || !r.IsError || len(r.Resources) != 1 || r.Resources[0].Path != "/p" {
		t.Fatalf("call: %+v %v", r, err)
	}
	if _, err := c.Call(ctx, &CallRequest{Name: "gone"}); !errors.Is(err, sdk.ErrProviderGone) || err.Error() != `plugin "bash" exited while the call was running` {
		t.Errorf("a gone provider: %v", err)
	}
	var e *sdk.Error
	if _, err := c.Call(ctx, &CallRequest{Name: "broken"}); !errors.As(err, &e) || e.Code != codes.Internal || err.Error() != "the tool broke" {
		t.Errorf("a broken tool: %v", err)
	}
}

// An interception and the interceptor's answers cross the wire whole.
func TestInterceptAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	var got *Interception
	reg := &fakeRegistrar{intercept: func(_ context.Context, in *Interception) error {
		if in.TimeoutMs < 0 {
			return Invalid("an interception's timeout is 0 to 600000 ms (asked -1)")
		}
		got = in
		return nil
	}}
	ic := fakeInterceptor{
		before: func(_ context.Context, r *BeforeCall) (*BeforeDecision, error) {
			if r.Call.Tool == "broken" {
				return nil, errors.New("the hook broke")
			}
			return &BeforeDecision{Verdict: VerdictDeny, Reason: r.Call.Alias + " " + string(r.Call.Arguments), UpdatedArguments: []byte(`{"x":1}`)}, nil
		},
		after: func(_ context.Context, r *AfterCall) (*AfterFeedback, error) {
			return &AfterFeedback{Feedback: "saw " + r.Result.Text, Stop: true, StopReason: "enough"}, nil
		},
	}
	conn := seamtest.Conn(t, func(s *grpc.Server) {
		toolsv1.RegisterToolsServer(s, NewServer(reg))
		toolsv1.RegisterToolInterceptorServer(s, NewInterceptorServer(ic))
	})
	c := NewClient(conn)
	if err := c.Intercept(ctx, &Interception{Patterns: []string{"Bash"}, Aliases: map[string]string{"bash": "Bash"}, Before: true, TimeoutMs: 5}); err != nil || got.Aliases["bash"] != "Bash" || !got.Before || got.TimeoutMs != 5 {
		t.Fatalf("intercept: %+v %v", got, err)
	}
	if err := c.Intercept(ctx, &Interception{TimeoutMs: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a bad interception: %v", err)
	}
	ic2 := NewInterceptorClient(conn)
	var _ Interceptor = ic2
	d, err := ic2.Before(ctx, &BeforeCall{Call: &InterceptedCall{Tool: "bash", Alias: "Bash", Arguments: []byte(`{}`)}})
	if err != nil || d.Verdict != VerdictDeny || d.Reason != "Bash {}" || string(d.UpdatedArguments) != `{"x":1}` {
		t.Fatalf("before: %+v %v", d, err)
	}
	var e *sdk.Error
	if _, err := ic2.Before(ctx, &BeforeCall{Call: &InterceptedCall{Tool: "broken"}}); !errors.As(err, &e) || err.Error() != "the hook broke" {
		t.Fatalf("a broken before: %v", err)
	}
	fb, err := ic2.After(ctx, &AfterCall{Call: &InterceptedCall{Tool: "bash"}, Result: &CallResult{Text: "out"}})
	if err != nil || fb.Feedback != "saw out" || !fb.Stop || fb.StopReason != "enough" {
		t.Fatalf("after: %+v %v", fb, err)
	}
}
