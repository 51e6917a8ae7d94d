package jobtable

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/jobs"
	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/internal/seam"
)

// The manager through its handles alone: fakes stand for the executor, and
// no process runs.

// fakeProcess is a Process whose every method is a field; an unset one
// reads nothing, kills nothing and waits until ctx ends. It is done when
// done is closed, or at once when there is none.
type fakeProcess struct {
	pid       int
	read      func(context.Context) (Output, error)
	kill      func(context.Context) (bool, error)
	wait      func(context.Context) (State, error)
	done      chan struct{}
	forgotten atomic.Int32
	waits     atomic.Int32
}

func (p *fakeProcess) AfterDone(f func()) func() bool {
	if p.done == nil {
		go f()
		return func() bool { return false }
	}
	stop := make(chan struct{})
	var once sync.Once
	ran := make(chan bool, 1)
	go func() {
		select {
		case <-p.done:
			ran <- true
			f()
		case <-stop:
			ran <- false
		}
	}()
	return func() bool {
		once.Do(func() { close(stop) })
		return !<-ran
	}
}

func (p *fakeProcess) Pid() int { return p.pid }
func (p *fakeProcess) Forget()  { p.forgotten.Add(1) }

func (p *fakeProcess) ReadOutput(ctx context.Context) (Output, error) {
	if p.read == nil {
		return Output{State: State{Status: Running}}, nil
	}
	return p.read(ctx)
}

func (p *fakeProcess) Kill(ctx context.Context) (bool, error) {
	if p.kill == nil {
		return false, nil
	}
	return p.kill(ctx)
}

func (p *fakeProcess) Wait(ctx context.Context) (State, error) {
	p.waits.Add(1)
	if p.wait == nil {
		<-ctx.Done()
		return State{}, ctx.Err()
	}
	return p.wait(ctx)
}

// opened is one call of Open.
type opened struct{ owner, key, id string }

type fakes struct {
	m      *Manager
	mu     sync.Mutex
	procs  map[string]*fakeProcess // by process id
	opened []opened
}

// newFakes makes a manager whose Open hands out procs, each to the owner
// its id starts with ("agent-1" is agent's).
func newFakes(t *testing.T, cfg Config, procs map[string]*fakeProcess) *fakes {
	t.Helper()
	f := &fakes{procs: procs}
	cfg.Open = func(_ context.Context, owner, key, id string) (Process, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.opened = append(f.opened, opened{owner, key, id})
		p, ok := f.procs[id]
		if !ok {
			return nil, errors.New("no process " + id)
		}
		if !strings.HasPrefix(id, owner+"-") {
			return nil, errors.New("process " + id + " belongs to another owner")
		}
		return p, nil
	}
	f.m = New(cfg)
	t.Cleanup(f.m.Close)
	return f
}

func (f *fakes) register(t *testing.T, owner, id string) Snapshot {
	t.Helper()
	snap, err := f.m.Register(bg, Registration{Plugin: "tools", Owner: owner, Key: "shell", ProcessID: id, Command: "cmd " + id})
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	return snap
}

// errAway is how a handle fails while its executor restarts.
var errAway = status.Error(codes.Unavailable, `plugin "bash" is restarting`)

// Wait fails while the executor is away: the job asks again with a backoff
// that doubles from 50ms, and its notice comes once the executor answers.
func TestWaitAsksAgainWithABackoff(t *testing.T) {
	attempts := make(chan time.Time, 100)
	back := make(chan struct{})
	p := &fakeProcess{pid: 42, wait: func(ctx context.Context) (State, error) {
		attempts <- time.Now()
		select {
		case <-back:
			return State{Status: Completed, ExitCode: 3}, nil
		default:
			return State{}, errAway
		}
	}}
	f := newFakes(t, Config{}, map[string]*fakeProcess{"agent-1": p})
	snap := f.register(t, "agent", "agent-1")
	if snap.Pid != 42 || snap.Status != Running {
		t.Fatalf("snapshot %+v", snap)
	}
	var at []time.Time
	for range 5 {
		select {
		case a := <-attempts:
			at = append(at, a)
		case <-time.After(wait):
			t.Fatalf("%d waits, then no more", len(at))
		}
	}
	for i, want := range []time.Duration{50, 100, 200, 400} {
		gap := at[i+1].Sub(at[i])
		if gap < want*time.Millisecond*9/10 {
			t.Errorf("wait %d came %v after the one before, want at least %v (a backoff, not a spin)", i+2, gap, want*time.Millisecond)
		}
	}
	if n := f.m.TakeNotices("agent"); len(n) != 0 {
		t.Fatalf("a notice while the executor is away: %+v", n)
	}
	close(back)
	eventually(t, "the notice once the executor answers", func() bool {
		n := f.m.List("agent")
		return len(n) == 1 && n[0].Status == Completed
	})
	if n := f.m.TakeNotices("agent"); len(n) != 1 || n[0].ID != snap.ID || n[0].ExitCode != 3 || n[0].Pid != 42 {
		t.Fatalf("notices %+v", n)
	}
}

// A wait served for a while and then cut (the old executor's stop) is
// asked again at once, not after the longest backoff; a wait that reports
// a running process is no answer.
func TestWaitCutAfterAWhileAsksAgainSoon(t *testing.T) {
	calls := make(chan int, 100)
	var n atomic.Int32
	cut := make(chan struct{})
	p := &fakeProcess{wait: func(ctx context.Context) (State, error) {
		i := int(n.Add(1))
		calls <- i
		switch {
		case i <= 5:
			return State{}, errAway // the backoff grows to its bound
		case i == 6:
			<-cut // served until the executor stops
			return State{}, errAway
		case i == 7:
			return State{Status: Running}, nil
		}
		return State{Status: Killed, ExitCode: -1, Signal: "SIGTERM"}, nil
	}}
	f := newFakes(t, Config{}, map[string]*fakeProcess{"agent-1": p})
	f.register(t, "agent", "agent-1")
	next := func(want int) {
		t.Helper()
		select {
		case i := <-calls:
			if i != want {
				t.Fatalf("wait %d, want %d", i, want)
			}
		case <-time.After(wait):
			t.Fatalf("no wait %d", want)
		}
	}
	for i := 1; i <= 6; i++ {
		next(i)
	}
	time.Sleep(waitRetryMax + 100*time.Millisecond) // served longer than the bound
	close(cut)
	cutAt := time.Now()
	next(7)
	if d := time.Since(cutAt); d > waitRetryMax/2 {
		t.Errorf("asked again %v after a long wait was cut, want about %v", d, waitRetryMin)
	}
	next(8)
	eventually(t, "the notice after a wait that said running", func() bool {
		l := f.m.List("agent")
		return len(l) == 1 && l[0].Status == Killed
	})
	if got := f.m.TakeNotices("agent"); len(got) != 1 || got[0].Signal != "SIGTERM" {
		t.Fatalf("notices %+v", got)
	}
}

// A job's wait ends with the job: released, read to its end, or the
// manager closed, whether it is waiting or backing off. (goleak checks no
// goroutine is left at the end.)
func TestWaitEndsWithTheJob(t *testing.T) {
	ended := make(chan string, 10)
	waiting := func(name string) func(context.Context) (State, error) {
		return func(ctx context.Context) (State, error) {
			<-ctx.Done()
			ended <- name
			return State{}, ctx.Err()
		}
	}
	finished := &fakeProcess{wait: waiting("read"), read: func(context.Context) (Output, error) {
		return Output{Stdout: []byte("last\n"), State: State{Status: Completed}}, nil
	}}
	killed := make(chan struct{}, 1)
	released := &fakeProcess{wait: waiting("released"), kill: func(context.Context) (bool, error) {
		killed <- struct{}{}
		return true, nil
	}}
	closed := &fakeProcess{wait: waiting("closed")}
	var failures atomic.Int32
	away := &fakeProcess{wait: func(context.Context) (State, error) {
		failures.Add(1)
		return State{}, errAway
	}}
	f := newFakes(t, Config{}, map[string]*fakeProcess{"agent-1": finished, "gone-1": released, "other-1": closed, "other-2": away})
	a := f.register(t, "agent", "agent-1")
	f.register(t, "gone", "gone-1")
	f.register(t, "other", "other-1")
	f.register(t, "other", "other-2")
	// Their processes are done: each job's wait begins.
	eventually(t, "every job's wait began", func() bool {
		return finished.waits.Load() > 0 && released.waits.Load() > 0 && closed.waits.Load() > 0 && away.waits.Load() > 0
	})
	expect := func(name string) {
		t.Helper()
		select {
		case got := <-ended:
			if got != name {
				t.Fatalf("the wait of %q ended, want %q", got, name)
			}
		case <-time.After(wait):
			t.Fatalf("the wait of %q did not end", name)
		}
	}
	if s, out, err := f.m.Read(bg, "agent", a.ID); err != nil || string(out.Stdout) != "last\n" || s.Status != Completed {
		t.Fatalf("final read: %+v %q %v", s, out.Stdout, err)
	}
	expect("read")
	if finished.forgotten.Load() != 1 {
		t.Error("the final read did not forget the process")
	}
	f.m.ReleaseOwner("gone")
	select {
	case <-killed:
	default:
		t.Error("ReleaseOwner returned before it killed the job through its handle")
	}
	expect("released")
	if released.forgotten.Load() != 1 {
		t.Error("ReleaseOwner did not forget the process")
	}
	eventually(t, "the failing wait is asked again", func() bool { return failures.Load() >= 2 })
	f.m.Close() // waits for the jobs' waits
	select {
	case got := <-ended:
		if got != "closed" {
			t.Fatalf("ended %q", got)
		}
	default:
		t.Fatal("Close returned before the job's wait ended")
	}
	n := failures.Load()
	time.Sleep(2 * waitRetryMax)
	if failures.Load() != n {
		t.Fatal("a wait was asked again after Close")
	}
}

// A job whose process runs asks its executor nothing: the wait begins
// once the process is done, and a job dropped before that never waits.
func TestNoWaitWhileTheProcessRuns(t *testing.T) {
	running := &fakeProcess{pid: 1, done: make(chan struct{}), wait: func(context.Context) (State, error) {
		return State{Status: Completed, ExitCode: 2}, nil
	}}
	killed := &fakeProcess{pid: 2, done: make(chan struct{})}
	killed.kill = func(context.Context) (bool, error) {
		close(killed.done)
		return true, nil
	}
	killed.wait = func(context.Context) (State, error) {
		return State{Status: Killed, ExitCode: -1, Signal: "SIGTERM"}, nil
	}
	released := &fakeProcess{pid: 3, done: make(chan struct{})}
	closed := &fakeProcess{pid: 4, done: make(chan struct{})}
	f := newFakes(t, Config{}, map[string]*fakeProcess{"agent-1": running, "agent-2": killed, "gone-1": released, "other-1": closed})
	a := f.register(t, "agent", "agent-1")
	k := f.register(t, "agent", "agent-2")
	f.register(t, "gone", "gone-1")
	f.register(t, "other", "other-1")
	time.Sleep(200 * time.Millisecond)
	for _, p := range []*fakeProcess{running, killed, released, closed} {
		if n := p.waits.Load(); n != 0 {
			t.Fatalf("process %d: %d waits while it runs", p.pid, n)
		}
	}
	if n := f.m.TakeNotices("agent"); len(n) != 0 {
		t.Fatalf("notices while the jobs run: %+v", n)
	}

	// A kill returns once the wait that follows the end has said so.
	if ok, err := f.m.Kill(bg, "agent", k.ID); !ok || err != nil {
		t.Fatalf("kill: %v %v", ok, err)
	}
	if l := f.m.List("agent"); len(l) != 2 || l[1].ID != k.ID || l[1].Status != Killed || killed.waits.Load() != 1 {
		t.Fatalf("after the kill: %+v, %d waits", l, killed.waits.Load())
	}
	close(running.done)
	eventually(t, "the notice of the job that ended", func() bool {
		l := f.m.List("agent")
		return len(l) == 2 && l[0].ID == a.ID && l[0].Status == Completed
	})
	if running.waits.Load() != 1 {
		t.Fatalf("%d waits of a finished process, want 1", running.waits.Load())
	}

	// Dropped before their end: no wait, then or later.
	f.m.ReleaseOwner("gone")
	f.m.Close()
	close(released.done)
	close(closed.done)
	time.Sleep(100 * time.Millisecond)
	if n := released.waits.Load() + closed.waits.Load(); n != 0 {
		t.Fatalf("%d waits of dropped jobs", n)
	}
}

// Reads, kills and registrations go through the handle and say what it
// said: the executor's facts reach the wire, and its failures keep their
// code.
func TestServerThroughTheHandle(t *testing.T) {
	facts := &jobs.Collected{Total: 9000, Truncated: true, Dropped: 7000, DroppedLines: 70, SpillPath: "/s/p.stdout", SpillBytes: 9000, SpillComplete: true}
	errFacts := &jobs.Collected{Total: 4, SpillReason: "budget"}
	reads := 0
	p := &fakeProcess{pid: 7,
		read: func(context.Context) (Output, error) {
			reads++
			if reads == 1 {
				return Output{}, status.Error(codes.Unavailable, `plugin "bash" is unreachable`)
			}
			return Output{Stdout: []byte("tail\n"), Stderr: []byte("err\n"), Lossy: true, StdoutSpill: "/s/p.stdout",
				StdoutFacts: facts, StderrFacts: errFacts, State: State{Status: Running}}, nil
		},
		kill: func(context.Context) (bool, error) {
			return false, status.Error(codes.Unavailable, `plugin "bash" is unreachable`)
		},
	}
	f := newFakes(t, Config{}, map[string]*fakeProcess{"agent-1": p, "agent-2": {}})
	type ownerKey struct{}
	var reached []string
	s := jobs.NewServer(&Service{M: f.m, Caller: "tools",
		Serving: func(ctx context.Context) (seam.Served, bool) {
			o, ok := ctx.Value(ownerKey{}).(string)
			return seam.Served{Owner: o}, ok
		},
		Reaches: func(key string) error {
			reached = append(reached, key)
			if key != "shell" && key != "sandbox" {
				return status.Errorf(codes.PermissionDenied, "plugin tools did not declare inject %q", key)
			}
			return nil
		},
	})
	ctx := context.WithValue(bg, ownerKey{}, "agent")
	j, err := s.Register(ctx, &jobsv1.RegisterRequest{ProcessId: "agent-1", Command: "make"})
	if err != nil || j.Pid != 7 || j.Id != "j1" {
		t.Fatalf("register: %v %v", j, err)
	}
	if _, err := s.Register(ctx, &jobsv1.RegisterRequest{ProcessId: "agent-2", ShellKey: "sandbox"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, &jobsv1.RegisterRequest{ProcessId: "agent-2", ShellKey: "tools"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an executor key the plugin may not reach: %v", err)
	}
	f.mu.Lock()
	got := f.opened
	f.mu.Unlock()
	// No key means ctx.shell; a refused key is never opened.
	if len(got) != 2 || got[0] != (opened{"agent", "shell", "agent-1"}) || got[1] != (opened{"agent", "sandbox", "agent-2"}) {
		t.Fatalf("opened %+v", got)
	}
	if strings.Join(reached, " ") != "shell sandbox tools" {
		t.Fatalf("keys checked: %v", reached)
	}

	_, err = s.Read(ctx, &jobsv1.JobRef{Id: "j1"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "j1") || !strings.Contains(status.Convert(err).Message(), "unreachable") {
		t.Fatalf("read while the executor is away: %v", err)
	}
	r, err := s.Read(ctx, &jobsv1.JobRef{Id: "j1"})
	if err != nil || string(r.Stdout) != "tail\n" || string(r.Stderr) != "err\n" || !r.Lossy || r.StdoutSpillPath != "/s/p.stdout" ||
		r.StdoutFacts.GetDropped() != 7000 || !r.StdoutFacts.GetSpillComplete() || r.StderrFacts.GetSpillReason() != "budget" || r.Job.Status != "running" {
		t.Fatalf("read: %v %v", r, err)
	}
	if _, err := s.Kill(ctx, &jobsv1.JobRef{Id: "j1"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("kill while the executor is away: %v", err)
	}
	// A read that fails or says running forgets nothing.
	if p.forgotten.Load() != 0 {
		t.Fatal("a running job's process was forgotten")
	}
}

// Open refuses: the job is not made, and the reason is said.
func TestOpenRefuses(t *testing.T) {
	f := newFakes(t, Config{}, map[string]*fakeProcess{"alice-1": {}})
	if _, err := f.m.Register(bg, Registration{Owner: "mallory", Key: "shell", ProcessID: "alice-1"}); err == nil || !strings.Contains(err.Error(), "belongs to another owner") {
		t.Fatalf("another owner's process: %v", err)
	}
	if l := f.m.List("mallory"); len(l) != 0 {
		t.Fatalf("jobs after a refusal: %+v", l)
	}
	// A finished job no longer counts against the cap, as it is noticed
	// through its wait.
	done := make(chan struct{})
	g := newFakes(t, Config{MaxPerOwner: 1}, map[string]*fakeProcess{
		"agent-1": {wait: func(ctx context.Context) (State, error) {
			select {
			case <-done:
				return State{Status: Completed}, nil
			case <-ctx.Done():
				return State{}, ctx.Err()
			}
		}},
		"agent-2": {},
	})
	g.register(t, "agent", "agent-1")
	if _, err := g.m.Register(bg, Registration{Owner: "agent", Key: "shell", ProcessID: "agent-2"}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("over the cap: %v", err)
	}
	close(done)
	eventually(t, "the slot frees once the wait says finished", func() bool {
		_, err := g.m.Register(bg, Registration{Owner: "agent", Key: "shell", ProcessID: "agent-2"})
		return err == nil
	})
}

// A kill returns once the job is seen finished: a read right after it
// never finds the job still running, however late the process's wait
// reports the end.
func TestKillSettles(t *testing.T) {
	dead := make(chan struct{})
	p := &fakeProcess{pid: 7,
		kill: func(context.Context) (bool, error) {
			go func() { time.Sleep(200 * time.Millisecond); close(dead) }()
			return true, nil
		},
		wait: func(ctx context.Context) (State, error) {
			select {
			case <-dead:
				return State{Status: Killed, Signal: "SIGTERM"}, nil
			case <-ctx.Done():
				return State{}, ctx.Err()
			}
		},
	}
	f := newFakes(t, Config{}, map[string]*fakeProcess{"agent-1": p})
	snap := f.register(t, "agent", "agent-1")
	if killed, err := f.m.Kill(bg, "agent", snap.ID); !killed || err != nil {
		t.Fatalf("kill: %v %v", killed, err)
	}
	for _, j := range f.m.List("agent") {
		if j.ID == snap.ID && j.Status != Killed {
			t.Fatalf("right after the kill the job is %v", j.Status)
		}
	}
}
