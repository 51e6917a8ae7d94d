package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins/probev1"
	"github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
)

// fake is a plugin whose description and behaviour each test sets.
type fake struct {
	desc     Description
	register func(s *grpc.Server)
	apply    func(ctx context.Context) error
	dispose  func(ctx context.Context) error
	health   func(ctx context.Context) error
}

func (f *fake) Describe() Description { return f.desc }
func (f *fake) Register(s *grpc.Server) {
	if f.register != nil {
		f.register(s)
	}
}
func (f *fake) Apply(ctx context.Context, _ *Host, _ json.RawMessage) error {
	if f.apply != nil {
		return f.apply(ctx)
	}
	return nil
}
func (f *fake) Dispose(ctx context.Context) error {
	if f.dispose != nil {
		return f.dispose(ctx)
	}
	return nil
}
func (f *fake) Health(ctx context.Context) error {
	if f.health != nil {
		return f.health(ctx)
	}
	return nil
}

func registerShellEnv(s *grpc.Server) {
	shellenvv1.RegisterShellEnvServer(s, shellenvv1.UnimplementedShellEnvServer{})
}

func registerBoth(s *grpc.Server) {
	registerShellEnv(s)
	probev1.RegisterProbeServer(s, probev1.UnimplementedProbeServer{})
}

// served returns a lifecycle for f with its services registered on a
// server (like go-plugin's, which already holds services of its own), and
// what registering said.
func served(f *fake) (*lifecycle, error) {
	l := newLifecycle(f, hclog.NewNullLogger())
	l.dial = func(uint32) (*grpc.ClientConn, error) {
		// Never used to call: the tests' Apply does not reach the host.
		return grpc.NewClient("passthrough:///host", grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	s := grpc.NewServer()
	healthgrpc.RegisterHealthServer(s, health.NewServer())
	return l, l.register(s)
}

func describe(t *testing.T, l *lifecycle) *pluginv1.Description {
	t.Helper()
	d, err := l.Describe(context.Background(), &pluginv1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestServicesDerivedFromRegister(t *testing.T) {
	l, err := served(&fake{desc: Description{Name: "env", Provides: []Provide{{Key: "shellEnv", CallerState: true}}}, register: registerShellEnv})
	if err != nil {
		t.Fatal(err)
	}
	d := describe(t, l)
	p := d.Provides[0]
	if p.Key != "shellEnv" || !p.CallerState || strings.Join(p.GrpcServices, ",") != "dsh.shellenv.v1.ShellEnv" {
		t.Fatalf("provide: %v", p)
	}
	kinds := map[string]bool{}
	for _, m := range p.Methods {
		kinds[m.Name] = m.ServerStreaming || m.ClientStreaming
	}
	want := map[string]bool{
		"/dsh.shellenv.v1.ShellEnv/Collect":    false,
		"/dsh.shellenv.v1.ShellEnv/Register":   false,
		"/dsh.shellenv.v1.ShellEnv/Unregister": false,
		"/dsh.shellenv.v1.ShellEnv/List":       false,
		"/dsh.shellenv.v1.ShellEnv/Watch":      true,
	}
	if len(kinds) != len(want) {
		t.Errorf("methods %v, want %v", kinds, want)
	}
	for name, streams := range want {
		if got, ok := kinds[name]; !ok || got != streams {
			t.Errorf("method %s: listed %v, streaming %v; want streaming %v", name, ok, got, streams)
		}
	}
	// Lifecycle is the SDK's, not a key's.
	for _, svc := range p.GrpcServices {
		if strings.HasPrefix(svc, "dsh.plugin.v1.") {
			t.Errorf("key %q derived the SDK's own %s", p.Key, svc)
		}
	}
}

func TestServicesDeclaredAndChecked(t *testing.T) {
	// Two keys to derive from what is registered: which is whose?
	l, err := served(&fake{desc: Description{Name: "two", Provides: []Provide{{Key: "a"}, {Key: "b"}}}, register: registerBoth})
	if err == nil {
		t.Fatal("two keys left to derive: no error")
	}
	if !strings.Contains(err.Error(), `plugin "two"`) || !strings.Contains(err.Error(), "dsh.shellenv.v1.ShellEnv") {
		t.Errorf("ambiguity error %q names neither the plugin nor the service", err)
	}
	// One key left to derive gets what the others do not name.
	l, err = served(&fake{desc: Description{Name: "mixed", Provides: []Provide{
		{Key: "probe", Services: []string{"dsh.probe.v1.Probe"}}, {Key: "shellEnv"},
	}}, register: registerBoth})
	if err != nil {
		t.Fatal(err)
	}
	if p := describe(t, l).Provides; strings.Join(p[0].GrpcServices, ",") != "dsh.probe.v1.Probe" || strings.Join(p[1].GrpcServices, ",") != "dsh.shellenv.v1.ShellEnv" {
		t.Errorf("mixed provides: %v", p)
	}
	// Declared services are kept as given; what no key claims (a callback
	// service) stays the plugin's own.
	l, err = served(&fake{desc: Description{Name: "one", Provides: []Provide{
		{Key: "probe", Services: []string{"dsh.probe.v1.Probe"}},
	}}, register: registerBoth})
	if err != nil {
		t.Fatal(err)
	}
	if p := describe(t, l).Provides[0]; strings.Join(p.GrpcServices, ",") != "dsh.probe.v1.Probe" || len(p.Methods) != 3 {
		t.Errorf("declared provide: %v", p)
	}
	// A plugin that provides nothing may still serve callbacks.
	if _, err := served(&fake{desc: Description{Name: "tools"}, register: registerShellEnv}); err != nil {
		t.Errorf("no keys: %v", err)
	}
}

func TestServiceMismatchIsAnErrorAtStart(t *testing.T) {
	l, err := served(&fake{desc: Description{Name: "bad", Provides: []Provide{
		{Key: "shellEnv", Services: []string{"dsh.shellenv.v1.ShellEnvv"}},
	}}, register: registerShellEnv})
	if err == nil {
		t.Fatal("a declared service that is not registered: no error")
	}
	for _, want := range []string{`plugin "bad"`, `"shellEnv"`, `"dsh.shellenv.v1.ShellEnvv"`, "registers dsh.shellenv.v1.ShellEnv"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	// Describe, the host's first call, answers with it.
	if _, err := l.Describe(context.Background(), &pluginv1.DescribeRequest{}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `"dsh.shellenv.v1.ShellEnvv"`) {
		t.Errorf("Describe after a mismatch: %v", err)
	}
}

func TestDisposeAfterFailedApply(t *testing.T) {
	var made, disposed atomic.Int32
	f := &fake{
		desc:     Description{Name: "half", Provides: []Provide{{Key: "shellEnv"}}},
		register: registerShellEnv,
		apply: func(context.Context) error {
			made.Add(1) // something a half-done Apply leaves behind
			return errors.New("the second step failed")
		},
		dispose: func(context.Context) error {
			if made.Load() == 0 {
				t.Error("Dispose ran before Apply")
			}
			disposed.Add(1)
			return nil
		},
	}
	l, err := served(f)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Apply(context.Background(), &pluginv1.ApplyRequest{Id: "half"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the second step failed") {
		t.Fatalf("Apply: %v", err)
	}
	if disposed.Load() != 1 {
		t.Fatalf("Dispose ran %d times after the failed Apply, want 1", disposed.Load())
	}
	// The host's own Dispose afterwards is answered without a second run.
	if _, err := l.Dispose(context.Background(), &pluginv1.DisposeRequest{}); err != nil || disposed.Load() != 1 {
		t.Errorf("Dispose RPC: %v, plugin Dispose ran %d times", err, disposed.Load())
	}
	// It serves nothing more of its own, and cannot be applied again.
	if err := l.gate("/dsh.shellenv.v1.ShellEnv/Collect"); status.Code(err) != codes.Unavailable {
		t.Errorf("a call after the failed Apply: %v", err)
	}
	if err := l.gate("/dsh.plugin.v1.Lifecycle/Health"); err != nil {
		t.Errorf("Health after the failed Apply: %v", err)
	}
	if _, err := l.Apply(context.Background(), &pluginv1.ApplyRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second Apply: %v", err)
	}
}

func TestNoDisposeWithoutApply(t *testing.T) {
	var disposed atomic.Int32
	l, _ := served(&fake{desc: Description{Name: "idle"}, dispose: func(context.Context) error { disposed.Add(1); return nil }})
	if _, err := l.Dispose(context.Background(), &pluginv1.DisposeRequest{}); err != nil || disposed.Load() != 0 {
		t.Errorf("Dispose before Apply: %v, ran %d", err, disposed.Load())
	}
	if _, err := l.Apply(context.Background(), &pluginv1.ApplyRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Apply after Dispose: %v", err)
	}
}

func TestHealthAndReleaseDuringSlowApply(t *testing.T) {
	entered, unblock := make(chan struct{}), make(chan struct{})
	l, _ := served(&fake{desc: Description{Name: "slow"}, apply: func(context.Context) error {
		close(entered)
		<-unblock
		return nil
	}})
	applied := make(chan error, 1)
	go func() {
		_, err := l.Apply(context.Background(), &pluginv1.ApplyRequest{})
		applied <- err
	}()
	bounded.Receive(t, entered, "Apply entered")
	answered := make(chan error, 2)
	go func() {
		r, err := l.Health(context.Background(), &pluginv1.HealthRequest{})
		if err == nil && !r.Ok {
			err = errors.New(r.Detail)
		}
		answered <- err
	}()
	go func() {
		_, err := l.Release(context.Background(), &pluginv1.ReleaseRequest{Caller: "x"})
		answered <- err
	}()
	for range 2 {
		select {
		case err := <-answered:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Health or Release waited for Apply")
		}
	}
	close(unblock)
	if err := bounded.Receive(t, applied, "Apply's answer"); err != nil {
		t.Fatal(err)
	}
}

func TestDisposeDuringApply(t *testing.T) {
	entered := make(chan struct{})
	var applyReturned, disposedAfter atomic.Bool
	l, _ := served(&fake{
		desc: Description{Name: "slow"},
		apply: func(ctx context.Context) error {
			close(entered)
			<-ctx.Done() // a Dispose cancels the Apply it meets
			time.Sleep(50 * time.Millisecond)
			applyReturned.Store(true)
			return ctx.Err()
		},
		dispose: func(context.Context) error {
			disposedAfter.Store(applyReturned.Load())
			return nil
		},
	})
	applied := make(chan error, 1)
	go func() {
		_, err := l.Apply(context.Background(), &pluginv1.ApplyRequest{})
		applied <- err
	}()
	bounded.Receive(t, entered, "Apply entered")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.Dispose(ctx, &pluginv1.DisposeRequest{}); err != nil {
		t.Fatal(err)
	}
	if !disposedAfter.Load() {
		t.Error("the plugin's Dispose ran before its Apply returned")
	}
	if err := bounded.Receive(t, applied, "Apply's answer"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("the disposed Apply: %v", err)
	}
}

func TestDisposeDuringApplyThatSucceeds(t *testing.T) {
	entered, unblock := make(chan struct{}), make(chan struct{})
	var disposed atomic.Int32
	l, _ := served(&fake{
		desc:    Description{Name: "deaf"},
		apply:   func(context.Context) error { close(entered); <-unblock; return nil }, // ignores its context
		dispose: func(context.Context) error { disposed.Add(1); return nil },
	})
	applied := make(chan error, 1)
	go func() {
		_, err := l.Apply(context.Background(), &pluginv1.ApplyRequest{})
		applied <- err
	}()
	bounded.Receive(t, entered, "Apply entered")
	// The host gives up waiting: the plugin is disposed when Apply returns.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Dispose(ctx, &pluginv1.DisposeRequest{}); err == nil {
		t.Error("Dispose returned while Apply still ran")
	}
	close(unblock)
	if err := bounded.Receive(t, applied, "Apply's answer"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "disposed") {
		t.Errorf("Apply that outlived a Dispose: %v", err)
	}
	if disposed.Load() != 1 {
		t.Errorf("plugin Dispose ran %d times, want 1", disposed.Load())
	}
}
