//go:build linux

package termsessions

import (
	"bytes"
	"context"
	"errors"
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

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
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

// Open, then a command sent and read back, the prompt recognised before
// and after; the session says what it is.
func TestOpenSendRead(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	in := f.open(t, "agent", OpenRequest{Name: "main", Cwd: dir, Cols: 100, Rows: 30})
	if !strings.HasPrefix(in.ID, "t1-") || len(in.ID) != len("t1-")+12 || in.Name != "main" || in.Backend != "bash" || in.Dialect != "bash" || in.Cwd != dir || in.Cols != 100 || in.Rows != 30 || in.Pid == 0 || in.Exited {
		t.Fatalf("opened: %+v", in)
	}
	f.readToPrompt(t, "agent", in.ID, "")
	f.send(t, "agent", in.ID, "echo h''i; pwd")
	out := f.readToPrompt(t, "agent", in.ID, "hi\r\n"+dir+"\r\n")
	if !strings.Contains(out, "echo h''i; pwd\r\n") {
		t.Errorf("the typed line is not echoed: %q", out)
	}
	// Nothing new: not read twice, and still at the prompt.
	r, err := f.m.Read(context.Background(), "agent", in.ID, 0)
	if err != nil || len(r.Data) != 0 || !r.AtPrompt {
		t.Fatalf("a read with nothing new: %+v %v", r, err)
	}
	// A command that runs is not at its prompt.
	f.send(t, "agent", in.ID, "sleep 0.5; echo w''oke")
	r, _ = f.m.Read(context.Background(), "agent", in.ID, 300*time.Millisecond)
	if r.AtPrompt {
		t.Errorf("at the prompt while a command runs: %q", r.Data)
	}
	f.readToPrompt(t, "agent", in.ID, "woke")
	// exit ends the shell: the session says so and stays until closed.
	f.send(t, "agent", in.ID, "exit 4")
	deadline := time.Now().Add(10 * time.Second)
	for !r.Exited && time.Now().Before(deadline) {
		r, _ = f.m.Read(context.Background(), "agent", in.ID, time.Second)
	}
	if !r.Exited || r.ExitCode != 4 || r.AtPrompt {
		t.Fatalf("after exit 4: %+v", r)
	}
	if s, err := f.m.Send(context.Background(), "agent", in.ID, "echo late", true, ""); err != nil || !s.Exited {
		t.Fatalf("a send to an exited session: %+v %v", s, err)
	}
	if _, err := f.m.CloseSession(context.Background(), "agent", in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Read(context.Background(), "agent", in.ID, 0); !errors.Is(err, terminals.ErrNoSession) {
		t.Fatalf("a read after close: %v", err)
	}
}

// Another owner gets nothing of a session: each call is answered as for a
// session that does not exist, and its list is its own.
func TestOwnersAreApart(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "a", OpenRequest{Name: "shared-name"})
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["send"] = f.m.Send(ctx, "b", in.ID, "echo x", true, "")
	_, checks["read"] = f.m.Read(ctx, "b", in.ID, 0)
	_, _, checks["signal"] = f.m.Signal("b", in.ID, "SIGINT", false)
	_, checks["resize"] = f.m.Resize("b", in.ID, 90, 20)
	_, checks["close"] = f.m.CloseSession(ctx, "b", in.ID)
	_, unknown := f.m.Read(ctx, "b", "t99-000000000000", 0)
	for op, err := range checks {
		if !errors.Is(err, terminals.ErrNoSession) || err.Error() != strings.Replace(unknown.Error(), "t99-000000000000", in.ID, 1) {
			t.Errorf("%s of another owner's session: %v (an unknown one: %v)", op, err, unknown)
		}
	}
	if l, err := f.m.List("b"); err != nil || len(l) != 0 {
		t.Errorf("another owner's list: %v %v", l, err)
	}
	// Names are per owner.
	other := f.open(t, "b", OpenRequest{Name: "shared-name"})
	if l, err := f.m.List("a"); err != nil || len(l) != 1 || l[0].ID != in.ID {
		t.Errorf("the owner's list: %+v %v", l, err)
	}
	f.readToPrompt(t, "a", in.ID, "")
	f.send(t, "a", in.ID, "echo st''ill")
	f.readToPrompt(t, "a", in.ID, "still")
	f.readToPrompt(t, "b", other.ID, "")
}

// At most 128 sessions per owner, the 129th refused with the reason; a
// name twice refused; after a close the next open works. Other owners
// are not counted.
func TestCapAndNames(t *testing.T) {
	f := newFixture(t, nil)
	f.b.argv = []string{"cat"}
	var wg sync.WaitGroup
	errs := make(chan error, terminals.MaxPerOwner)
	for i := range terminals.MaxPerOwner {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := f.m.Open(ctx, "agent", OpenRequest{Name: fmt.Sprintf("s%d", i)}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	_, err := f.m.Open(context.Background(), "agent", OpenRequest{})
	if !errors.Is(err, terminals.ErrTooMany) || !strings.Contains(err.Error(), "128 terminal sessions are open") {
		t.Fatalf("the 129th: %v", err)
	}
	if n := f.b.starts.Load(); n != terminals.MaxPerOwner {
		t.Errorf("the backend was asked %d times", n)
	}
	f.open(t, "other", OpenRequest{Name: "s1"})
	l, _ := f.m.List("agent")
	if len(l) != terminals.MaxPerOwner {
		t.Fatalf("listed %d", len(l))
	}
	if _, err := f.m.CloseSession(context.Background(), "agent", l[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err = f.m.Open(context.Background(), "agent", OpenRequest{Name: l[1].Name})
	if !errors.Is(err, terminals.ErrDuplicateName) || !strings.Contains(err.Error(), `"`+l[1].Name+`"`) {
		t.Fatalf("a name twice: %v", err)
	}
	f.open(t, "agent", OpenRequest{Name: "s-new"})
}

// One send at a time: a second one while the first is in flight is
// refused, and a signal still gets through.
func TestSendActive(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "agent", OpenRequest{})
	f.readToPrompt(t, "agent", in.ID, "")
	// The first send the backend is asked for holds until released; the
	// later ones pass. Which send is first is counted, never guessed from
	// whether the test happens to be receiving yet.
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var sends atomic.Int32
	f.b.onSend = func(ctx context.Context) error {
		if sends.Add(1) != 1 {
			return nil
		}
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := f.m.Send(ctx, "agent", in.ID, "echo fi''rst", true, "")
		done <- err
	}()
	receive(t, entered, "the first send reaching the backend")
	_, err := f.m.Send(context.Background(), "agent", in.ID, "echo second", true, "")
	if !errors.Is(err, terminals.ErrSendActive) {
		t.Fatalf("a second send: %v", err)
	}
	// (SIGTSTP, which an interactive shell at its prompt ignores.)
	if ok, _, err := f.m.Signal("agent", in.ID, "SIGTSTP", false); err != nil || !ok {
		t.Fatalf("a signal during a send: %v %v", ok, err)
	}
	close(release)
	if err := receive(t, done, "the first send"); err != nil {
		t.Fatal(err)
	}
	f.readToPrompt(t, "agent", in.ID, "first")
	f.send(t, "agent", in.ID, "echo th''ird")
	f.readToPrompt(t, "agent", in.ID, "third")
}

// Signals: SIGINT interrupts the foreground command and not the shell;
// a SIGKILL for the shell is refused in favour of close (at its prompt
// too, where it is the foreground); a SIGKILL of a foreground command is
// not; only the five signals are taken; a signal with a send comes first.
func TestSignals(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "agent", OpenRequest{})
	f.readToPrompt(t, "agent", in.ID, "")
	term := f.m.sessions[in.ID].Terminal()
	// The command is in the foreground once the group's leader runs it
	// (before its exec it is the shell's child, which ignores SIGINT).
	waitForeground := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if g, err := term.Foreground(); err == nil && g != term.Pid() {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", g)); strings.HasPrefix(string(b), "sleep\x00") {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("the command never came to the foreground")
			}
		}
	}
	f.send(t, "agent", in.ID, "sleep 4243")
	waitForeground()
	if ok, _, err := f.m.Signal("agent", in.ID, "SIGINT", false); !ok || err != nil {
		t.Fatalf("SIGINT: %v %v", ok, err)
	}
	f.readToPrompt(t, "agent", in.ID, "")
	f.send(t, "agent", in.ID, "echo st''atus=$?")
	f.readToPrompt(t, "agent", in.ID, "status=130")
	if len(testplugins.Matching("sleep 4243")) > 0 {
		t.Fatal("the interrupted sleep lives")
	}
	for _, shell := range []bool{true, false} {
		if _, _, err := f.m.Signal("agent", in.ID, "SIGKILL", shell); !errors.Is(err, terminals.ErrInvalid) || !strings.Contains(err.Error(), "close the session") {
			t.Errorf("SIGKILL for the shell (target shell %v): %v", shell, err)
		}
	}
	if _, _, err := f.m.Signal("agent", in.ID, "SIGUSR1", false); !errors.Is(err, terminals.ErrInvalid) || !strings.Contains(err.Error(), "SIGINT, SIGTERM, SIGKILL, SIGTSTP, SIGHUP") {
		t.Errorf("a signal off the list: %v", err)
	}
	f.send(t, "agent", in.ID, "sleep 4244")
	waitForeground()
	if ok, _, err := f.m.Signal("agent", in.ID, "SIGKILL", false); !ok || err != nil {
		t.Fatalf("SIGKILL of the foreground sleep: %v %v", ok, err)
	}
	f.readToPrompt(t, "agent", in.ID, "")
	// A signal with the send: SIGINT for what runs, then the next line.
	f.send(t, "agent", in.ID, "sleep 4245")
	waitForeground()
	if _, err := f.m.Send(context.Background(), "agent", in.ID, "echo af''ter", true, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	f.readToPrompt(t, "agent", in.ID, "after")
	if st, _, _ := term.State(); st != procs.Running {
		t.Fatal("the shell died")
	}
}

// Close returns once the session's whole tree is gone, setsid and nohup
// children included.
func TestCloseWaitsForTree(t *testing.T) {
	f := newFixture(t, nil)
	if !f.sub.Cgroups() {
		t.Skip("no cgroups here: setsid children escape a process group")
	}
	in := f.open(t, "agent", OpenRequest{})
	f.readToPrompt(t, "agent", in.ID, "")
	f.send(t, "agent", in.ID, "setsid sleep 7321 & nohup sleep 7322 >/dev/null 2>&1 & echo st''arted")
	f.readToPrompt(t, "agent", in.ID, "started")
	for deadline := time.Now().Add(10 * time.Second); len(testplugins.Matching("sleep 732")) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the children did not start: %v", testplugins.Matching("sleep 732"))
		}
	}
	out, err := f.m.CloseSession(context.Background(), "agent", in.ID)
	if err != nil || !out.Exited {
		t.Fatalf("close: %+v %v", out, err)
	}
	if left := testplugins.Matching("sleep 732"); len(left) > 0 {
		t.Fatalf("left after close: %v", left)
	}
	if testplugins.Alive(in.Pid) {
		t.Fatal("the shell lives")
	}
	if _, err := f.m.CloseSession(context.Background(), "agent", in.ID); !errors.Is(err, terminals.ErrNoSession) {
		t.Fatalf("a second close: %v", err)
	}
}

// A released owner's sessions end (their trees gone), and the owner is
// not live from then on; a closing registry refuses everything.
func TestReleaseAndClose(t *testing.T) {
	f := newFixture(t, nil)
	a := f.open(t, "a", OpenRequest{})
	b := f.open(t, "b", OpenRequest{})
	ctx := context.Background()
	if err := f.m.ReleaseOwner(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if testplugins.Alive(a.Pid) {
		t.Fatal("a released owner's shell lives")
	}
	if _, err := f.m.Open(ctx, "a", OpenRequest{}); !errors.Is(err, terminals.ErrOwnerNotLive) {
		t.Fatalf("an open for a released owner: %v", err)
	}
	if _, err := f.m.List("a"); !errors.Is(err, terminals.ErrOwnerNotLive) {
		t.Fatalf("a released owner's list: %v", err)
	}
	if _, err := f.m.Read(ctx, "a", a.ID, 0); !errors.Is(err, terminals.ErrOwnerNotLive) {
		t.Fatalf("a released owner's read: %v", err)
	}
	if !testplugins.Alive(b.Pid) {
		t.Fatal("another owner's shell died")
	}
	if err := f.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if testplugins.Alive(b.Pid) {
		t.Fatal("a shell outlived the registry")
	}
	if _, err := f.m.Open(ctx, "b", OpenRequest{}); !errors.Is(err, terminals.ErrServiceDisposing) {
		t.Fatalf("an open after close: %v", err)
	}
	if _, err := f.m.List("b"); !errors.Is(err, terminals.ErrServiceDisposing) {
		t.Fatalf("a list after close: %v", err)
	}
	if err := f.m.RegisterBackend(f.c, "bash", "bash"); !errors.Is(err, terminals.ErrServiceDisposing) {
		t.Fatalf("a registration after close: %v", err)
	}
}

// An owner released while its open runs gets no session: what was
// started for it is closed.
func TestReleaseDuringOpen(t *testing.T) {
	f := newFixture(t, nil)
	var pid atomic.Int32
	f.b.afterSpawn = func() error {
		for _, p := range f.sub.Terminals("a") {
			pid.Store(int32(p.Pid()))
		}
		return f.m.ReleaseOwner(context.Background(), "a")
	}
	if _, err := f.m.Open(context.Background(), "a", OpenRequest{}); !errors.Is(err, terminals.ErrOwnerNotLive) {
		t.Fatalf("open: %v", err)
	}
	if p := pid.Load(); p == 0 || testplugins.Alive(int(p)) {
		t.Fatalf("the shell started for a released owner (pid %d) lives", p)
	}
}

// A start that fails after its spawn leaves nothing: the terminal the
// backend spawned under the call is closed; the next open works.
func TestFailedStartLeavesNothing(t *testing.T) {
	f := newFixture(t, nil)
	var pid atomic.Int32
	f.b.afterSpawn = func() error {
		for _, p := range f.sub.Terminals("agent") {
			pid.Store(int32(p.Pid()))
		}
		return errors.New("the backend fell over")
	}
	_, err := f.m.Open(context.Background(), "agent", OpenRequest{})
	if err == nil || !strings.Contains(err.Error(), `backend "bash"`) || !strings.Contains(err.Error(), "fell over") {
		t.Fatalf("open: %v", err)
	}
	if p := pid.Load(); p == 0 || testplugins.Alive(int(p)) {
		t.Fatalf("the shell of the failed open (pid %d) lives", p)
	}
	if l, _ := f.m.List("agent"); len(l) != 0 {
		t.Fatalf("listed: %+v", l)
	}
	f.b.afterSpawn = nil
	in := f.open(t, "agent", OpenRequest{})
	f.readToPrompt(t, "agent", in.ID, "")
	if _, err := f.m.Open(context.Background(), "agent", OpenRequest{Cwd: "/nowhere"}); !errors.Is(err, terminals.ErrInvalid) {
		t.Fatalf("an open in no folder: %v", err)
	}
	if _, err := f.m.Open(context.Background(), "agent", OpenRequest{Cols: 5000}); !errors.Is(err, terminals.ErrInvalid) {
		t.Fatalf("an open out of range: %v", err)
	}
}

// Backends by name: another plugin cannot take a name; another process of
// the same plugin entry takes it over, and gives it back if its scope goes
// while the first still serves; an open names one, or takes the only one.
func TestBackends(t *testing.T) {
	f := newFixture(t, nil)
	other := &testCaller{id: "other", slot: f.serve(t, f.b)}
	err := f.m.RegisterBackend(other, "bash", "bash")
	if !errors.Is(err, terminals.ErrDuplicateBackend) || !strings.Contains(err.Error(), `plugin "term"`) || !strings.Contains(err.Error(), `plugin "other"`) {
		t.Fatalf("another plugin's name: %v", err)
	}
	if err := f.m.RegisterBackend(other, "pwsh", "pwsh"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Open(context.Background(), "agent", OpenRequest{}); !errors.Is(err, terminals.ErrNoBackend) || !strings.Contains(err.Error(), "bash, pwsh") {
		t.Fatalf("an open naming none of two: %v", err)
	}
	if _, err := f.m.Open(context.Background(), "agent", OpenRequest{Backend: "zsh"}); !errors.Is(err, terminals.ErrNoBackend) {
		t.Fatalf("an open naming none registered: %v", err)
	}
	if in := f.open(t, "agent", OpenRequest{Backend: "pwsh"}); in.Backend != "pwsh" {
		t.Fatalf("opened with %q", in.Backend)
	}
	other.dispose(t)
	if got := f.m.Backends(); len(got) != 1 || got[0] != "bash" {
		t.Fatalf("after the plugin went: %v", got)
	}
	// A reload of "term": its new scope takes bash over, and gives it
	// back when it goes while the old one serves.
	reloaded := &testCaller{id: "term", slot: f.serve(t, f.b)}
	if err := f.m.RegisterBackend(reloaded, "bash", "bash"); err != nil {
		t.Fatal(err)
	}
	if f.m.backends["bash"].slot != reloaded.slot {
		t.Fatal("not taken over")
	}
	reloaded.dispose(t)
	if b := f.m.backends["bash"]; b == nil || b.slot != f.c.slot {
		t.Fatal("not given back")
	}
	// Gone with its only scope: nothing to open with.
	f.c.dispose(t)
	if _, err := f.m.Open(context.Background(), "agent", OpenRequest{}); !errors.Is(err, terminals.ErrNoBackend) {
		t.Fatalf("an open with no backend: %v", err)
	}
	if err := f.m.RegisterBackend(&testCaller{id: "x"}, "bash", "bash"); !errors.Is(err, terminals.ErrInvalid) {
		t.Fatalf("a caller that serves nothing: %v", err)
	}
	if err := f.m.RegisterBackend(other, "no spaces", "bash"); !errors.Is(err, terminals.ErrInvalid) {
		t.Fatalf("a bad name: %v", err)
	}
}

// A session opened through a backend goes on when the backend goes, and
// a send then says the backend is not there; reads, signals and close
// need no backend.
func TestSessionOutlivesItsBackend(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "agent", OpenRequest{})
	f.readToPrompt(t, "agent", in.ID, "")
	f.c.dispose(t)
	if _, err := f.m.Send(context.Background(), "agent", in.ID, "echo x", true, ""); !errors.Is(err, terminals.ErrNoBackend) {
		t.Fatalf("a send without its backend: %v", err)
	}
	// Its successor (the same entry, a new process) types again.
	again := &testCaller{id: "term", slot: f.serve(t, f.b)}
	if err := f.m.RegisterBackend(again, "bash", "bash"); err != nil {
		t.Fatal(err)
	}
	f.send(t, "agent", in.ID, "echo ba''ck")
	f.readToPrompt(t, "agent", in.ID, "back")
}

// The screen hook: attached as the session opens, before any read, with
// the terminal to observe; told of resizes; closed with the session.
func TestScreenHook(t *testing.T) {
	scr := &fakeScreen{}
	f := newFixture(t, func(c *Config) {
		c.Attach = func(id string, term *procs.Terminal) Screen {
			term.Observe(&scr.out)
			scr.id = id
			return scr
		}
	})
	in := f.open(t, "agent", OpenRequest{})
	if scr.id != in.ID {
		t.Fatalf("attached to %q", scr.id)
	}
	f.readToPrompt(t, "agent", in.ID, "")
	f.send(t, "agent", in.ID, "echo sc''reen")
	f.readToPrompt(t, "agent", in.ID, "screen")
	if _, err := f.m.Resize("agent", in.ID, 120, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Resize("agent", in.ID, 0, 40); !errors.Is(err, terminals.ErrInvalid) {
		t.Fatalf("a resize out of range: %v", err)
	}
	if _, err := f.m.CloseSession(context.Background(), "agent", in.ID); err != nil {
		t.Fatal(err)
	}
	scr.mu.Lock()
	defer scr.mu.Unlock()
	if !strings.Contains(scr.out.String(), prompt+"echo sc''reen") || !strings.Contains(scr.out.String(), "screen\r\n") || scr.size != [2]int{120, 40} || !scr.closed {
		t.Fatalf("the screen: %q %v %v", scr.out.String(), scr.size, scr.closed)
	}
}

type fakeScreen struct {
	out    syncbuf.Buffer
	id     string
	mu     sync.Mutex
	size   [2]int
	closed bool
}

func (s *fakeScreen) Resize(c, r int) { s.mu.Lock(); s.size = [2]int{c, r}; s.mu.Unlock() }
func (s *fakeScreen) Close() error    { s.mu.Lock(); s.closed = true; s.mu.Unlock(); return nil }

func TestAtPrompt(t *testing.T) {
	p := []byte(prompt)
	for _, c := range []struct {
		out  string
		want bool
	}{
		{prompt, true},
		{"out\r\n\x1b[?2004h" + prompt, true},
		{prompt + "\x1b[K", true},
		{prompt + "\x1b[?2004h\x1b]0;title\x07", true},
		{prompt + "ls", false},
		{prompt + "ls\r\nfile\r\n", false},
		{prompt + "\x1b[", false},
		{"$ ", false},
		{"", false},
	} {
		if got := AtPrompt([]byte(c.out), p); got != c.want {
			t.Errorf("AtPrompt(%q) = %v", c.out, got)
		}
	}
	if AtPrompt([]byte(prompt), nil) {
		t.Error("a dialect without a prompt is at it")
	}
}
