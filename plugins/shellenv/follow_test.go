package shellenv

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs srv on a fresh socket path; stop ends it.
func serve(t *testing.T, sock string, srv shellenvv1.ShellEnvServer) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	shellenvv1.RegisterShellEnvServer(s, srv)
	go func() { _ = s.Serve(l) }()
	return s.Stop
}

// dial is a Client on the provider at sock.
func dial(t *testing.T, sock string) *Client {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return NewClient(conn)
}

// fakeEnv is an Env made of functions, for the adapters.
type fakeEnv struct {
	collect    func(context.Context) (Snapshot, error)
	register   func(ctx context.Context, name, value string) error
	unregister func(ctx context.Context, name string) error
	list       func(context.Context) ([]Fact, error)
	watch      func(ctx context.Context, send func(Snapshot) error) error
}

func (f *fakeEnv) Collect(ctx context.Context) (Snapshot, error) { return f.collect(ctx) }
func (f *fakeEnv) Register(ctx context.Context, name, value string) error {
	return f.register(ctx, name, value)
}
func (f *fakeEnv) Unregister(ctx context.Context, name string) error { return f.unregister(ctx, name) }
func (f *fakeEnv) List(ctx context.Context) ([]Fact, error)          { return f.list(ctx) }
func (f *fakeEnv) Watch(ctx context.Context, send func(Snapshot) error) error {
	return f.watch(ctx, send)
}

// over is an Env over reg whose registrations are owner's.
func over(reg *store, owner string) *fakeEnv {
	return &fakeEnv{
		collect:    func(context.Context) (Snapshot, error) { return reg.Collect(), nil },
		register:   func(_ context.Context, name, value string) error { return reg.Register(owner, name, value) },
		unregister: func(_ context.Context, name string) error { return reg.Unregister(owner, name) },
		list:       func(context.Context) ([]Fact, error) { return reg.List(), nil },
		watch:      reg.Watch,
	}
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (f *Follower) live() *Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.latest
}

func TestFollowerFollowsAndFallsBack(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "env.sock")
	reg := newStore("/h")
	stop := serve(t, sock, NewServer(over(reg, "tester")))
	ctx := context.Background()
	f := dial(t, sock).Follow()
	defer f.Close()

	waitFor(t, "the first snapshot", func() bool { return f.live() != nil })
	if err := reg.Register("p", "DSH_X", "1"); err != nil {
		t.Fatal(err)
	}
	want := reg.Collect().Generation
	waitFor(t, "the change to arrive", func() bool { s := f.live(); return s != nil && s.Generation == want })
	if s, err := f.Snapshot(ctx); err != nil || s.Env["DSH_X"] != "1" || s.Env["DSH_HOME"] != "/h" {
		t.Fatalf("followed snapshot: %v %v", s, err)
	}

	// The provider goes away: Snapshot collects, and when nobody answers
	// it serves the last snapshot it had, marked stale (the host keeps a
	// crashed provider's key bound while it restarts).
	stop()
	waitFor(t, "the watch to drop", func() bool { return f.live() == nil })
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if s, err := f.Snapshot(cctx); err != nil || !s.Stale || s.Env["DSH_X"] != "1" {
		t.Errorf("with no provider: %+v %v, want the last snapshot, stale", s, err)
	}
	cancel()
	// A caller that gave up gets its error, not a snapshot.
	cctx, cancel = context.WithCancel(ctx)
	cancel()
	if _, err := f.Snapshot(cctx); err == nil {
		t.Error("a snapshot was served to a cancelled caller")
	}

	// A new provider on the same address: followed again.
	reg2 := newStore("/h2")
	stop2 := serve(t, sock, NewServer(over(reg2, "tester")))
	defer stop2()
	waitFor(t, "the new provider's snapshot", func() bool { s := f.live(); return s != nil && s.Env["DSH_HOME"] == "/h2" })
}

// collectOnly is a provider without Watch (an older or third-party one).
type collectOnly struct {
	shellenvv1.UnimplementedShellEnvServer
	reg *store
}

func (c collectOnly) Collect(context.Context, *shellenvv1.CollectRequest) (*shellenvv1.Snapshot, error) {
	s := c.reg.Collect()
	return &shellenvv1.Snapshot{Env: s.Env, Generation: s.Generation}, nil
}

func TestFollowerWithoutWatchCollects(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "env.sock")
	reg := newStore("/h")
	defer serve(t, sock, collectOnly{reg: reg})()
	f := dial(t, sock).Follow()
	defer f.Close()
	for i := 0; i < 3; i++ {
		if err := reg.Register("p", "DSH_N", string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
		s, err := f.Snapshot(context.Background())
		if err != nil || s.Env["DSH_N"] != string(rune('a'+i)) {
			t.Fatalf("round %d: %v %v", i, s.Env, err)
		}
	}
	if f.live() != nil {
		t.Error("a provider without Watch produced a followed snapshot")
	}
}
