package jobtable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/jobs"
	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/seam"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(procs.SpawnerGoroutine))
}

// wait is the bound of every poll: generous, as the tests share two noisy
// cores with -race.
const wait = 30 * time.Second

type fixture struct {
	t   *testing.T
	sub *procs.Manager
	m   *Manager
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	sub, err := procs.New(procs.Config{
		SpillDir: filepath.Join(t.TempDir(), "spill"),
		Environ:  func() []string { return []string{"PATH=" + os.Getenv("PATH")} },
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Open = func(_ context.Context, owner, key, id string) (Process, error) {
		if key != "shell" {
			return nil, fmt.Errorf("no executor %q", key)
		}
		p, err := sub.Get(owner, id)
		if err != nil {
			return nil, err
		}
		return &tableProcess{sub: sub, p: p}, nil
	}
	f := &fixture{t: t, sub: sub, m: New(cfg)}
	t.Cleanup(func() {
		f.m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := sub.Close(ctx); err != nil {
			t.Errorf("close ctx.subprocess: %v", err)
		}
	})
	return f
}

// bg is the context of the calls that are not about contexts.
var bg = context.Background()

// register registers process id as a job of owner, started by ctx.shell.
func (f *fixture) register(owner, id, command, description string) (Snapshot, error) {
	return f.m.Register(bg, Registration{Owner: owner, Key: "shell", ProcessID: id, Command: command, Description: description})
}

// tableProcess reaches a process of ctx.subprocess directly, as an
// executor over it does: these tests run real processes.
type tableProcess struct {
	sub *procs.Manager
	p   *procs.Process
}

func (t *tableProcess) Pid() int { return t.p.Pid }
func (t *tableProcess) Forget()  { t.sub.Forget(t.p.ID) }

func (t *tableProcess) Kill(context.Context) (bool, error) { return t.p.Kill(), nil }

func (t *tableProcess) AfterDone(f func()) func() bool { return t.p.AfterDone(f) }

func (t *tableProcess) Wait(ctx context.Context) (State, error) {
	select {
	case <-t.p.Done():
	case <-ctx.Done():
		return State{}, ctx.Err()
	}
	r := t.p.Result()
	return State{Status: Status(r.Status), ExitCode: r.ExitCode, Signal: r.Signal}, nil
}

func (t *tableProcess) ReadOutput(context.Context) (Output, error) {
	r := t.p.Read()
	return Output{
		Stdout: r.Stdout.Data, Stderr: r.Stderr.Data, Lossy: r.Lossy,
		StdoutSpill: r.Stdout.SpillPath, StderrSpill: r.Stderr.SpillPath,
		State: State{Status: Status(r.Status), ExitCode: r.ExitCode, Signal: r.Signal},
	}, nil
}

// spawn starts a bash script as a process of ctx.subprocess, not yet a job.
func (f *fixture) spawn(script string) *procs.Process {
	f.t.Helper()
	return f.spawnAs("agent", script)
}

// spawnAs spawns script as a process of owner.
func (f *fixture) spawnAs(owner, script string) *procs.Process {
	f.t.Helper()
	p, err := f.sub.Spawn(procs.Spec{Argv: []string{"bash", "-c", script}, Dir: f.t.TempDir(), Owner: owner})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// start spawns script and registers it as a job of owner.
func (f *fixture) start(owner, script string) (Snapshot, *procs.Process) {
	f.t.Helper()
	p := f.spawnAs(owner, script)
	snap, err := f.register(owner, p.ID, script, "test job")
	if err != nil {
		f.t.Fatalf("register %q: %v", script, err)
	}
	return snap, p
}

func done(t *testing.T, p *procs.Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(wait):
		t.Fatalf("process %s did not end", p.ID)
	}
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", wait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settled waits until the manager has seen owner's jobs end: with a cap
// of one live job, a registration goes through only then. The probe job
// it leaves is killed and read away.
func (f *fixture) settled(owner string) {
	f.t.Helper()
	p := f.spawn("exit 0")
	var snap Snapshot
	eventually(f.t, "the finished job stops counting as live", func() bool {
		var err error
		snap, err = f.register(owner, p.ID, "probe", "")
		return err == nil
	})
	done(f.t, p)
	eventually(f.t, "the probe job is read away", func() bool {
		_, _, err := f.m.Read(bg, owner, snap.ID)
		return errors.Is(err, ErrNotFound)
	})
}

func TestIDsAndSnapshots(t *testing.T) {
	f := newFixture(t, Config{})
	a, pa := f.start("agent", "sleep 600")
	b, _ := f.start("other", "sleep 600")
	c, _ := f.start("agent", "sleep 600")
	if a.ID != "j1" || b.ID != "j2" || c.ID != "j3" {
		t.Fatalf("ids %q %q %q, want j1 j2 j3 (one sequence across owners)", a.ID, b.ID, c.ID)
	}
	if a.Owner != "agent" || a.Command != "sleep 600" || a.Description != "test job" || a.Pid != pa.Pid || a.Status != Running || a.Started.IsZero() {
		t.Fatalf("snapshot %+v (pid %d)", a, pa.Pid)
	}
	if _, err := f.register("", pa.ID, "x", ""); err == nil || !strings.Contains(err.Error(), "needs an owner") {
		t.Fatalf("register without an owner: %v", err)
	}
	if _, err := f.register("agent", "p999-nope", "x", ""); err == nil || !strings.Contains(err.Error(), "p999-nope") {
		t.Fatalf("register of an unknown process: %v", err)
	}
}

func TestOwnersAreSeparate(t *testing.T) {
	f := newFixture(t, Config{})
	a, _ := f.start("agent", "sleep 600")
	for _, op := range []func() error{
		func() error { _, _, err := f.m.Read(bg, "other", a.ID); return err },
		func() error { _, err := f.m.Kill(bg, "other", a.ID); return err },
	} {
		if err := op(); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), a.ID) {
			t.Fatalf("another owner's job: %v, want ErrNotFound naming %s", err, a.ID)
		}
	}
	// Word for word the answer to an id nobody has: nothing says the job
	// exists.
	_, _, foreign := f.m.Read(bg, "other", a.ID)
	_, _, unknown := f.m.Read(bg, "other", "j99")
	if want := strings.ReplaceAll(unknown.Error(), "j99", a.ID); foreign.Error() != want {
		t.Fatalf("another owner's job is answered %q, an unknown one %q", foreign, want)
	}
	if _, _, err := f.m.Read(bg, "agent", "j99"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	if _, err := f.m.Kill(bg, "agent", "j99"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("kill of an unknown job: %v", err)
	}
	if l := f.m.List("other"); len(l) != 0 {
		t.Fatalf("another owner lists %+v", l)
	}
	// The foreign attempts changed nothing: the job still runs.
	if l := f.m.List("agent"); len(l) != 1 || l[0].Status != Running {
		t.Fatalf("list after foreign attempts: %+v", l)
	}
}

func TestListOldestFirst(t *testing.T) {
	var mu sync.Mutex
	clock := time.Unix(1000, 0)
	// Time runs backwards, so the order can only come from Started.
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(-time.Second)
		return clock
	}
	f := newFixture(t, Config{Now: now})
	for range 3 {
		f.start("agent", "sleep 600")
	}
	var ids []string
	for _, s := range f.m.List("agent") {
		ids = append(ids, s.ID)
	}
	if got := strings.Join(ids, " "); got != "j3 j2 j1" {
		t.Fatalf("list order %q, want j3 j2 j1 (oldest Started first)", got)
	}
}

func TestReadsConsumeAndTheFinalReadForgets(t *testing.T) {
	f := newFixture(t, Config{})
	gate := filepath.Join(t.TempDir(), "gate")
	snap, p := f.start("agent", "echo first; while [ ! -e "+gate+" ]; do sleep 0.02; done; echo second >&2; exit 3")
	var out string
	eventually(t, "the first line is read", func() bool {
		s, r, err := f.m.Read(bg, "agent", snap.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status != Running {
			t.Fatalf("finished before the gate: %+v", s)
		}
		out += string(r.Stdout)
		return out == "first\n"
	})
	// A read right after returns nothing new.
	if _, r, err := f.m.Read(bg, "agent", snap.ID); err != nil || len(r.Stdout) != 0 {
		t.Fatalf("second read: %q %v", r.Stdout, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done(t, p)
	s, r, err := f.m.Read(bg, "agent", snap.ID)
	if err != nil || s.Status != Completed || s.ExitCode != 3 || string(r.Stderr) != "second\n" || len(r.Stdout) != 0 {
		t.Fatalf("final read: %+v %q %q %v", s, r.Stdout, r.Stderr, err)
	}
	if _, _, err := f.m.Read(bg, "agent", snap.ID); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "forgotten") {
		t.Fatalf("read after the final read: %v", err)
	}
	if _, err := f.sub.Get("", p.ID); err == nil {
		t.Fatal("ctx.subprocess still holds the process of a forgotten job")
	}
	if l := f.m.List("agent"); len(l) != 0 {
		t.Fatalf("list after the final read: %+v", l)
	}
}

func TestNotices(t *testing.T) {
	f := newFixture(t, Config{MaxPerOwner: 1})
	long := "exit 4 # " + strings.Repeat("é", 100)
	_, p := f.start("agent", long)
	done(t, p)
	f.settled("agent")
	n := f.m.TakeNotices("agent")
	if len(n) != 1 || n[0].ID != "j1" || n[0].Status != Completed || n[0].ExitCode != 4 || n[0].Command != long {
		t.Fatalf("notices %+v, want j1 completed with code 4 and its whole command", n)
	}
	if n := f.m.TakeNotices("agent"); len(n) != 0 {
		t.Fatalf("notices are taken once; again: %+v", n)
	}

	// A killed job, and a command of several lines shown by its first.
	snap, p := f.start("agent", "sleep 600\necho never")
	if _, err := f.m.Kill(bg, "agent", snap.ID); err != nil {
		t.Fatal(err)
	}
	done(t, p)
	f.settled("agent")
	if n := f.m.TakeNotices("other"); len(n) != 0 {
		t.Fatalf("another owner got %+v", n)
	}
	n = f.m.TakeNotices("agent")
	if len(n) != 1 || n[0].ID != snap.ID || n[0].Status != Killed || !strings.HasPrefix(n[0].Signal, "SIG") || n[0].Command != "sleep 600\necho never" {
		t.Fatalf("notice of a killed job: %+v", n)
	}

	// A clean exit, and a notice dropped once the final output was read.
	snap, p = f.start("agent", "true")
	done(t, p)
	f.settled("agent")
	if _, _, err := f.m.Read(bg, "agent", snap.ID); err != nil {
		t.Fatal(err)
	}
	if n := f.m.TakeNotices("agent"); len(n) != 0 {
		t.Fatalf("notice after the final read: %+v", n)
	}
	snap, p = f.start("agent", "true")
	done(t, p)
	f.settled("agent")
	if n := f.m.TakeNotices("agent"); len(n) != 1 || n[0].ID != snap.ID || n[0].Status != Completed || n[0].ExitCode != 0 {
		t.Fatalf("notice of a clean exit: %+v", n)
	}
}

func TestLiveJobCap(t *testing.T) {
	f := newFixture(t, Config{MaxPerOwner: 2})
	a, pa := f.start("agent", "sleep 600")
	f.start("agent", "sleep 600")
	p := f.spawn("sleep 600")
	_, err := f.register("agent", p.ID, "third", "")
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), `2 jobs of "agent"`) {
		t.Fatalf("third live job: %v, want ErrTooMany", err)
	}
	// The cap is per owner.
	if _, err := f.register("other", f.spawnAs("other", "sleep 600").ID, "other's", ""); err != nil {
		t.Fatalf("another owner under its own cap: %v", err)
	}
	// A finished job no longer counts, read or not.
	if killed, err := f.m.Kill(bg, "agent", a.ID); err != nil || !killed {
		t.Fatalf("kill: %v %v", killed, err)
	}
	done(t, pa)
	q := f.spawn("sleep 600")
	eventually(t, "a slot frees once a job finished", func() bool {
		_, err := f.register("agent", q.ID, "after", "")
		return err == nil
	})
	if killed, err := f.m.Kill(bg, "agent", a.ID); err != nil || killed {
		t.Fatalf("kill of a finished job: %v %v, want false", killed, err)
	}
}

func TestDefaultCapIs16(t *testing.T) {
	f := newFixture(t, Config{})
	for range 16 { // the documented default, not the constant
		f.start("agent", "sleep 600")
	}
	p := f.spawn("sleep 600")
	if _, err := f.register("agent", p.ID, "17th", ""); !errors.Is(err, ErrTooMany) {
		t.Fatalf("17th live job: %v, want ErrTooMany", err)
	}
}

func TestRetentionForgetsUnreadJobs(t *testing.T) {
	f := newFixture(t, Config{Retention: 50 * time.Millisecond})
	snap, p := f.start("agent", "echo unread")
	done(t, p)
	eventually(t, "an unread finished job is forgotten after the retention", func() bool {
		_, err := f.sub.Get("", p.ID)
		return len(f.m.List("agent")) == 0 && err != nil
	})
	if _, _, err := f.m.Read(bg, "agent", snap.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read after the retention: %v", err)
	}
	// Its notice went with it: it would point at a job that is gone.
	if n := f.m.TakeNotices("agent"); len(n) != 0 {
		t.Fatalf("notice of a forgotten job: %+v", n)
	}
	// A running job is never forgotten by the retention.
	run, _ := f.start("agent", "sleep 600")
	time.Sleep(200 * time.Millisecond)
	if _, _, err := f.m.Read(bg, "agent", run.ID); err != nil {
		t.Fatalf("running job after the retention period: %v", err)
	}
}

func TestReleaseOwner(t *testing.T) {
	f := newFixture(t, Config{MaxPerOwner: 1})
	_, finished := f.start("agent", "true")
	done(t, finished)
	f.settled("agent") // its notice is queued
	a, pa := f.start("agent", "sleep 600")
	b, pb := f.start("other", "sleep 600")
	f.m.ReleaseOwner("agent")
	done(t, pa)
	if _, _, err := f.m.Read(bg, "agent", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read of a released job: %v", err)
	}
	if n := f.m.TakeNotices("agent"); len(n) != 0 {
		t.Fatalf("notices survive their owner's release: %+v", n)
	}
	if l := f.m.List("agent"); len(l) != 0 {
		t.Fatalf("list after release: %+v", l)
	}
	// The other owner's job runs on, and its end is not noticed as
	// anyone else's.
	if s, _, err := f.m.Read(bg, "other", b.ID); err != nil || s.Status != Running {
		t.Fatalf("other owner's job after the release: %+v %v", s, err)
	}
	select {
	case <-pb.Done():
		t.Fatal("the release killed another owner's job")
	default:
	}
	// The released owner can start again from nothing.
	f.start("agent", "sleep 600")
}

func TestClose(t *testing.T) {
	f := newFixture(t, Config{})
	a, pa := f.start("agent", "sleep 600")
	f.m.Close()
	p := f.spawn("true")
	if _, err := f.register("agent", p.ID, "late", ""); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("register after Close: %v", err)
	}
	if _, _, err := f.m.Read(bg, "agent", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read after Close: %v", err)
	}
	// Close leaves the processes to ctx.subprocess, which kills them at
	// its own Close; the end of one is not noticed any more.
	pa.Kill()
	done(t, pa)
	time.Sleep(50 * time.Millisecond)
	if n := f.m.TakeNotices("agent"); len(n) != 0 {
		t.Fatalf("notice after Close: %+v", n)
	}
}

func TestServerErrorsAndProto(t *testing.T) {
	f := newFixture(t, Config{MaxPerOwner: 1})
	// The owner is the host's to stamp: here a context value stands for
	// the call id.
	type ownerKey struct{}
	s := jobs.NewServer(&Service{M: f.m, Serving: func(ctx context.Context) (seam.Served, bool) {
		o, ok := ctx.Value(ownerKey{}).(string)
		return seam.Served{Owner: o}, ok
	}})
	as := func(owner string) context.Context { return context.WithValue(context.Background(), ownerKey{}, owner) }
	ctx := as("agent")
	p := f.spawn("sleep 600")
	// The owner a request names is not used.
	j, err := s.Register(ctx, &jobsv1.RegisterRequest{Owner: "forged", ProcessId: p.ID, Command: "sleep 600", Description: "d"})
	if err != nil || j.Id != "j1" || j.Owner != "agent" || j.Status != "running" || j.ExitCode != nil || j.Pid != int32(p.Pid) || j.Command != "sleep 600" {
		t.Fatalf("register: %v %v", j, err)
	}
	q := f.spawn("sleep 600")
	codeOf := func(err error) codes.Code { return status.Code(err) }
	if _, err := s.Register(ctx, &jobsv1.RegisterRequest{Owner: "agent", ProcessId: q.ID}); codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("over the cap: %v", err)
	}
	if _, err := s.Read(as("other"), &jobsv1.JobRef{Owner: "agent", Id: "j1"}); codeOf(err) != codes.NotFound {
		t.Fatalf("foreign read: %v", err)
	}
	if _, err := s.Kill(ctx, &jobsv1.JobRef{Owner: "agent", Id: "j9"}); codeOf(err) != codes.NotFound {
		t.Fatalf("unknown kill: %v", err)
	}
	if _, err := s.Register(context.Background(), &jobsv1.RegisterRequest{Owner: "agent", ProcessId: q.ID}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("a request that serves no call: %v", err)
	}
	if _, err := s.Register(as("other"), &jobsv1.RegisterRequest{ProcessId: q.ID}); err == nil {
		t.Fatal("another owner adopted agent's process")
	}
	if l, err := s.List(ctx, &jobsv1.ListRequest{Owner: "agent"}); err != nil || len(l.Jobs) != 1 || l.Jobs[0].Id != "j1" {
		t.Fatalf("list: %v %v", l, err)
	}
	if k, err := s.Kill(ctx, &jobsv1.JobRef{Owner: "agent", Id: "j1"}); err != nil || !k.Killed {
		t.Fatalf("kill: %v %v", k, err)
	}
	done(t, p)
	r, err := s.Read(ctx, &jobsv1.JobRef{Owner: "agent", Id: "j1"})
	if err != nil || r.Job.Status != "killed" || r.Job.Signal == "" || r.Job.ExitCode != nil {
		t.Fatalf("read of a killed job: %v %v", r, err)
	}

	// Exit codes go on the wire for every finished job without a signal.
	for _, c := range []struct {
		snap   Snapshot
		status string
		code   *int32
	}{
		{Snapshot{Status: Completed, ExitCode: 0}, "completed", new(int32(0))},
		{Snapshot{Status: Completed, ExitCode: 7}, "completed", new(int32(7))},
		{Snapshot{Status: Killed, ExitCode: -1}, "killed", new(int32(-1))},
		{Snapshot{Status: Killed, Signal: "SIGKILL"}, "killed", nil},
		{Snapshot{Status: Running}, "running", nil},
	} {
		j := JobProto(c.snap)
		if j.Status != c.status || (j.ExitCode == nil) != (c.code == nil) || c.code != nil && *j.ExitCode != *c.code {
			t.Errorf("JobProto(%+v) = %v, want %s %v", c.snap, j, c.status, c.code)
		}
	}
}

// Notices go to the plugin that registered the job, and stay for it.
func TestNoticesForThePluginThatRegistered(t *testing.T) {
	f := newFixture(t, Config{})
	p := f.spawn("true")
	snap, err := f.m.Register(bg, Registration{Plugin: "tools", Owner: "agent", Key: "shell", ProcessID: p.ID, Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	done(t, p)
	f.settled("agent")
	if n := f.m.TakeNoticesFor("agent", "other-tools"); len(n) != 0 {
		t.Fatalf("another plugin took %+v", n)
	}
	if n := f.m.TakeNoticesFor("agent", "tools"); len(n) != 1 || n[0].ID != snap.ID {
		t.Fatalf("the registering plugin got %+v", n)
	}
	if n := f.m.TakeNoticesFor("agent", "tools"); len(n) != 0 {
		t.Fatalf("taken twice: %+v", n)
	}
}

// Notices taken for a call that failed come back, first, for the next.
func TestGiveBack(t *testing.T) {
	f := newFixture(t, Config{})
	_, finished := f.start("agent", "true")
	done(t, finished)
	f.settled("agent")
	taken := f.m.TakeNoticesFor("agent", "")
	if len(taken) != 1 {
		t.Fatalf("taken: %+v", taken)
	}
	f.m.GiveBack("agent", "", taken)
	if again := f.m.TakeNoticesFor("agent", ""); len(again) != 1 || again[0].ID != taken[0].ID {
		t.Fatalf("after giving back: %+v", again)
	}
	if none := f.m.TakeNoticesFor("agent", ""); len(none) != 0 {
		t.Fatalf("told twice: %+v", none)
	}
}

// A job's unread bytes are what it printed that no read returned yet:
// none right after a read, what came since afterwards.
func TestUnreadBytes(t *testing.T) {
	f := newFixture(t, Config{})
	gate := filepath.Join(t.TempDir(), "gate")
	snap, p := f.start("agent", "printf abcdef; while [ ! -e "+gate+" ]; do sleep 0.02; done; printf 0123456789 >&2")
	listed := func() Snapshot {
		l := f.m.List("agent")
		if len(l) != 1 {
			t.Fatalf("list: %+v", l)
		}
		return l[0]
	}
	eventually(t, "6 bytes unread", func() bool { return listed().Unread == 6 })
	if _, out, err := f.m.Read(bg, "agent", snap.ID); err != nil || string(out.Stdout) != "abcdef" {
		t.Fatalf("read: %q %v", out.Stdout, err)
	}
	if s := listed(); s.Unread != 0 || s.Status != Running || !s.Finished.IsZero() {
		t.Fatalf("after the read: %+v", s)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done(t, p)
	eventually(t, "the end seen, 10 bytes unread", func() bool { s := listed(); return s.Status == Completed && s.Unread == 10 })
	if s := listed(); s.Finished.Before(s.Started) {
		t.Fatalf("finished %v before it started %v", s.Finished, s.Started)
	}
}

// A read took the streams' totals when the executor reports them, else
// at least what was written before it began.
func TestConsumedBy(t *testing.T) {
	totals := Output{StdoutFacts: &jobs.Collected{Total: 40}, StderrFacts: &jobs.Collected{Total: 2}}
	for _, c := range []struct {
		out    Output
		before int64
		want   int64
	}{
		{totals, 30, 42},
		{Output{}, 30, 30},
		{Output{StdoutFacts: &jobs.Collected{}}, 30, 30},
	} {
		if got := consumedBy(c.out, c.before); got != c.want {
			t.Errorf("consumedBy(%v, %d) = %d, want %d", c.out, c.before, got, c.want)
		}
	}
}

// Wait returns when the job ends, with ctx's error when ctx ends first,
// and another owner's job is as unknown as one that never was.
func TestWait(t *testing.T) {
	f := newFixture(t, Config{})
	short, _ := f.start("agent", "sleep 0.3")
	long, _ := f.start("agent", "sleep 600")
	if err := f.m.Wait(context.Background(), "other", short.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another owner's wait: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := f.m.Wait(ctx, "agent", long.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a running job past its context: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := f.m.Wait(ctx, "agent", short.ID); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if j, err := f.m.Job("agent", short.ID); err != nil || j.Status == Running {
		t.Fatalf("after the wait: %+v %v", j, err)
	}
}

// KillCall kills the running jobs one call of the owner registered, and
// no other: not another call's, not another owner's under the same call.
func TestKillCall(t *testing.T) {
	f := newFixture(t, Config{})
	reg := func(owner, call string) (Snapshot, *procs.Process) {
		t.Helper()
		p := f.spawnAs(owner, "sleep 600")
		snap, err := f.m.Register(bg, Registration{Owner: owner, Key: "shell", ProcessID: p.ID, Command: "sleep 600", Call: call})
		if err != nil {
			t.Fatal(err)
		}
		return snap, p
	}
	mine, pm := reg("agent", "c1")
	_, po := reg("agent", "c2")
	_, pt := reg("other", "c1")
	if n := f.m.KillCall(bg, "agent", ""); n != 0 {
		t.Fatalf("KillCall of no call killed %d", n)
	}
	if n := f.m.KillCall(bg, "agent", "c1"); n != 1 {
		t.Fatalf("KillCall killed %d, want 1", n)
	}
	done(t, pm)
	// Its wait reports the end a moment after the process's.
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		j, err := f.m.Job("agent", mine.ID)
		if err == nil && j.Status == Killed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call's job after KillCall: %+v %v", j, err)
		}
	}
	for _, p := range []*procs.Process{po, pt} {
		select {
		case <-p.Done():
			t.Fatalf("KillCall ended %s, not the call's", p.ID)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if n := f.m.KillCall(bg, "agent", "c1"); n != 0 {
		t.Fatalf("a second KillCall killed %d", n)
	}
}
