//go:build linux

package termsessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/internal/testplugins"
)

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
