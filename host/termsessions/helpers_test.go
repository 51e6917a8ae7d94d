//go:build linux

package termsessions

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/plugins/termbackend"
	"github.com/dshrun/dsh/plugins/termbackend/terminalv1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(procs.SpawnerGoroutine))
}

// The registry with real terminals: a backend served in process over gRPC
// that spawns through the host's subprocess Manager as the owner and call
// its connection carries, as a backend plugin's SpawnTerminal would be
// stamped.

const prompt = "\x1b]133;A;dsh=test\x07$ "

// shellBackend is a backend whose sessions run argv (an interactive bash
// with prompt by default).
type shellBackend struct {
	sub  *procs.Manager
	argv []string
	// hooks, when set, run inside Start (after the spawn) and Send.
	afterSpawn func() error
	onSend     func(ctx context.Context) error
	starts     atomic.Int32
	// watch, when set, is the sandbox watch each start answers with.
	watch func() string
}

func (b *shellBackend) Start(ctx context.Context, req *termbackend.StartRequest) (*termbackend.Started, error) {
	b.starts.Add(1)
	owner, call := stamp(ctx)
	argv := b.argv
	if argv == nil {
		argv = []string{"bash", "--norc", "--noprofile", "-i"}
	}
	dir := req.Cwd
	if dir == "" {
		dir = os.TempDir()
	}
	t, err := b.sub.SpawnTerminal(procs.TerminalSpec{
		Argv: argv, Dir: dir, Owner: owner, Call: call, Cols: int(req.Cols), Rows: int(req.Rows),
		Env: map[string]string{"PS1": `\[\e]133;A;dsh=test\a\]$ `, "HISTFILE": "", "TERM": "xterm"},
	})
	if err != nil {
		return nil, termbackend.CannotStart(err)
	}
	if b.afterSpawn != nil {
		if err := b.afterSpawn(); err != nil {
			return nil, err
		}
	}
	st := &termbackend.Started{ProcessId: t.ID(), Pid: int32(t.Pid()), Cwd: dir, Dialect: &termbackend.Dialect{Name: "bash", Prompt: []byte(prompt)}}
	if b.watch != nil {
		st.Settle = b.watch()
	}
	return st, nil
}

func (b *shellBackend) Send(ctx context.Context, req *termbackend.SendRequest) (bool, error) {
	if b.onSend != nil {
		if err := b.onSend(ctx); err != nil {
			return false, err
		}
	}
	owner, _ := stamp(ctx)
	t, err := b.sub.Terminal(owner, req.ProcessId)
	if err != nil {
		return false, termbackend.NotFound(err)
	}
	text := req.Text
	if req.Submit {
		text += "\r"
	}
	return t.Write(ctx, []byte(text))
}

// stamp is the owner and call a request acts for.
func stamp(ctx context.Context) (owner, call string) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("owner"); len(v) > 0 {
		owner = v[0]
	}
	if v := md.Get("call"); len(v) > 0 {
		call = v[0]
	}
	return owner, call
}

// testSlot is a backend plugin's slot: a connection to its in-process
// server, whose calls carry the owner and a fresh call.
type testSlot struct {
	conn *grpc.ClientConn
	dead *atomic.Bool
}

func (s *testSlot) Live() bool { return !s.dead.Load() }

var calls atomic.Int64

func (s *testSlot) Reach(owner string) (grpc.ClientConnInterface, string, func()) {
	call := fmt.Sprintf("call-%d", calls.Add(1))
	return stampedConn{s.conn, owner, call}, call, func() {}
}

type stampedConn struct {
	*grpc.ClientConn
	owner, call string
}

func (c stampedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	ctx = metadata.AppendToOutgoingContext(ctx, "owner", c.owner, "call", c.call)
	return c.ClientConn.Invoke(ctx, method, args, reply, opts...)
}

// testCaller is a plugin that registers backends; its effects run when
// the test disposes it.
type testCaller struct {
	id   string
	slot Slot
	mu   sync.Mutex
	effs []func(context.Context) error
}

func (c *testCaller) ID() string            { return c.id }
func (c *testCaller) Label() string         { return fmt.Sprintf("%q", c.id) }
func (c *testCaller) Serving() (Slot, bool) { return c.slot, c.slot != nil }
func (c *testCaller) dispose(t *testing.T) { // the scope goes
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.effs) - 1; i >= 0; i-- {
		_ = c.effs[i](context.Background())
	}
	c.effs = nil
}
func (c *testCaller) AddEffect(_ string, d func(context.Context) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.effs = append(c.effs, d)
	return nil
}

type fixture struct {
	sub *procs.Manager
	m   *Manager
	b   *shellBackend
	c   *testCaller
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	sub, err := procs.New(procs.Config{SpillDir: filepath.Join(t.TempDir(), "spill")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Sub: sub}
	if mod != nil {
		mod(&cfg)
	}
	f := &fixture{sub: sub, m: New(cfg), b: &shellBackend{sub: sub}}
	f.c = &testCaller{id: "term", slot: f.serve(t, f.b)}
	if err := f.m.RegisterBackend(f.c, "bash", "bash"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := f.m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := sub.Close(ctx); err != nil {
			t.Errorf("close subprocess: %v", err)
		}
	})
	return f
}

// serve serves b as a backend plugin's process and returns its slot.
func (f *fixture) serve(t *testing.T, b termbackend.Backend) *testSlot {
	conn := seamtest.Conn(t, func(s *grpc.Server) { terminalv1.RegisterBackendServer(s, termbackend.NewServer(b)) })
	return &testSlot{conn: conn, dead: &atomic.Bool{}}
}

func (f *fixture) open(t *testing.T, owner string, req OpenRequest) Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	in, err := f.m.Open(ctx, owner, req)
	if err != nil {
		t.Fatalf("open %+v: %v", req, err)
	}
	return in
}

// readToPrompt reads session id until its output holds want (if any) and
// then ends at the prompt, and returns all it read.
func (f *fixture) readToPrompt(t *testing.T, owner, id, want string) string {
	t.Helper()
	var all bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		out, err := f.m.Read(ctx, owner, id, time.Second)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		all.Write(out.Data)
		if out.AtPrompt && strings.Contains(all.String(), want) {
			return all.String()
		}
		if out.Exited {
			t.Fatalf("session %s exited (%+v) before %q; read %q", id, out.Info, want, all.String())
		}
	}
	t.Fatalf("session %s: no %q then a prompt in %q", id, want, all.String())
	return ""
}

// receiveWithin bounds every wait of a test on a channel: generous for a
// loaded machine, and a failure that names what did not come instead of a
// hang.
const receiveWithin = 30 * time.Second

// receive is one value from ch within receiveWithin; what names it.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(receiveWithin):
		t.Fatalf("%s: nothing within %s", what, receiveWithin)
		panic("unreachable")
	}
}

func (f *fixture) send(t *testing.T, owner, id, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := f.m.Send(ctx, owner, id, text, true, ""); err != nil {
		t.Fatalf("send %q to %s: %v", text, id, err)
	}
}
