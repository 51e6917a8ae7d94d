// Package jobtable is ctx.jobs: background jobs on top of the executors that
// start them. It owns job ids, the owner of each job (an agent), consuming
// reads, kill, the per-owner cap on live jobs, completion notices for the
// owner, and forgetting finished jobs once their final output is read or
// after a retention period; and, for the console of the person who runs
// the host, the list of every owner's jobs and a signal when it changes.
//
// A job holds a Process: a handle that reaches the process through the
// executor that started it, never the process table itself, so there is
// one consuming reader per process and the executor can say what its
// process did (a sandbox's denials, a runner that failed). Only the end of
// the process is seen without the executor (AfterDone): a running job holds
// no call on it, and no goroutine. Processes stay ctx.subprocess's: a job
// outlives the plugin (and the executor) that started it and dies with the
// composition.
package jobtable

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/jobs"
	"github.com/dshrun/dsh/internal/notify"
	"github.com/dshrun/dsh/internal/randid"
)

// Defaults.
const (
	DefaultMaxPerOwner = 16
	DefaultRetention   = 30 * time.Minute
)

// The bounds of the backoff between two failed Waits: short, since a
// reload or a restart in place takes well under a second, and bounded, so
// a finished job is noticed soon after its executor is back.
const (
	waitRetryMin = 50 * time.Millisecond
	waitRetryMax = time.Second
)

// killTimeout bounds each kill of a released owner's jobs: ctx.subprocess
// kills whatever is left when it releases the owner.
const killTimeout = 5 * time.Second

// Errors a caller can branch on.
var (
	ErrNotFound = jobs.ErrNotFound // another owner's job too
	ErrTooMany  = jobs.ErrTooMany
)

// Status of a job's process.
type Status string

const (
	Running   Status = "running"
	Completed Status = "completed" // the process exited by itself
	Killed    Status = "killed"    // a signal (ours or another's) ended it
)

// State is how a job's process stands.
type State struct {
	Status Status
	// ExitCode is the exit status once finished; -1 when killed.
	ExitCode int
	// Signal names the signal that ended it ("SIGKILL"), if one did.
	Signal string
	// Limits are the limits that stopped something in its tree.
	Limits []*jobs.LimitHit
}

func (s State) finished() bool { return s.Status == Completed || s.Status == Killed }

// Output is one consuming read of a job's process: what it printed since
// the previous read and how it stands.
type Output struct {
	Stdout, Stderr []byte
	// Lossy is true when bytes produced since the previous read were
	// dropped; the spill files hold them.
	Lossy                    bool
	StdoutSpill, StderrSpill string
	// Each stream's counts and spill file; their data is in Stdout and
	// Stderr.
	StdoutFacts, StderrFacts *jobs.Collected
	// Sandbox is what a sandboxing executor said of this output.
	Sandbox *jobs.SandboxInfo
	State   State
}

// Process is ctx.jobs' handle on a job's process. It reaches the process
// through the executor that started it, which interprets what it ran: the
// handle may fail while that executor restarts or reloads, and then works
// again with its successor, so a job outlives both.
type Process interface {
	// ReadOutput consumes what the process printed since the previous
	// read.
	ReadOutput(ctx context.Context) (Output, error)
	// Kill terminates the process's tree; false once it had finished.
	Kill(ctx context.Context) (bool, error)
	// AfterDone runs f, in a goroutine of its own, once the process has
	// finished (at once when it has); stop keeps f from running and
	// reports whether it did.
	AfterDone(f func()) (stop func() bool)
	// Wait blocks until the process has finished and says how it ended;
	// it is asked once AfterDone has run, so it answers at once. It fails
	// when the executor cannot be reached.
	Wait(ctx context.Context) (State, error)
	// Pid is the process id of the job's main process.
	Pid() int
	// Forget releases what holds a finished process once its job is gone.
	Forget()
}

// Facts is what a Process may tell the log of its job beyond its state.
type Facts interface {
	// Workdir is the working directory it was started in.
	Workdir() string
	// Written counts the bytes it printed so far, both streams.
	Written() int64
}

// Config configures a Manager.
type Config struct {
	// Open returns the handle of process processID, started by the
	// provider of key (an executor) for owner. It refuses a process that
	// is not owner's: only a process of the same owner can become its job.
	Open func(ctx context.Context, owner, key, processID string) (Process, error)
	// MaxPerOwner caps live (running) jobs per owner; 0 means 16.
	MaxPerOwner int
	// Retention is how long a finished job stays readable when nobody
	// reads its final output; 0 means 30 minutes.
	Retention time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger logs each job's start and end; nil logs nothing.
	Logger hclog.Logger
	// Handles reports whether owner's job ids are to be unguessable
	// handles rather than short numbers: for owners that many clients
	// share (a principal of the stateless protocol), where the id is what
	// ties a later call to the job. Nil: none.
	Handles func(owner string) bool
}

// Manager holds jobs. Safe for concurrent use.
type Manager struct {
	cfg Config
	// ctx ends every job's wait when the manager closes.
	ctx    context.Context
	cancel context.CancelFunc
	// waits counts the jobs' waiting goroutines; Close waits for them.
	waits sync.WaitGroup

	mu      sync.Mutex
	next    int
	jobs    map[string]*Job
	notices map[string][]pending // owner -> completion notices not yet delivered
	closed  bool

	changes notify.Set // a job came, finished or went (Changes)
}

// pending is a finished job whose owner has not been told yet.
type pending struct {
	job    string
	plugin string // who registered it: the tool that tells of it
	snap   Snapshot
}

// Job is one background job.
type Job struct {
	ID, Owner, Command, Description string
	Plugin                          string // entry id of the plugin that registered it
	Started                         time.Time
	proc                            Process
	unwatch                         func() bool        // stops proc's AfterDone before it ran
	stop                            context.CancelFunc // ends its wait, once it began
	waited                          chan struct{}      // closed once its wait has ended (or will never begin)
	state                           State              // as its wait last reported
	finished                        time.Time
	timer                           *time.Timer
	killAsked                       bool   // its owner asked Kill for it
	call                            string // the tool call that registered it
	// consumed counts the bytes (both streams) its reads have returned or
	// dropped: what the process had written when the last read took its
	// output.
	consumed int64
}

// Snapshot is a job's state.
type Snapshot struct {
	ID, Owner, Command, Description string
	Started                         time.Time
	Pid                             int
	Status                          Status
	ExitCode                        int
	Signal                          string
	Limits                          []*jobs.LimitHit
	// Finished is when its end was seen; zero while it runs.
	Finished time.Time
	// Unread counts the bytes it printed that no Read has returned yet
	// (0 when its process cannot say how much it printed).
	Unread int64
}

// Registration is a process to adopt as a job.
type Registration struct {
	// Plugin is the entry id of the plugin registering it, whose tool
	// calls are told when the job finishes (TakeNoticesFor).
	Plugin string
	Owner  string
	// Key is the executor that started the process; the job reaches the
	// process through it.
	Key                             string
	ProcessID, Command, Description string
	// Call is the tool call that registered it (KillCall), if any.
	Call string
}

// New makes a Manager.
func New(cfg Config) *Manager {
	if cfg.MaxPerOwner <= 0 {
		cfg.MaxPerOwner = DefaultMaxPerOwner
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, ctx: ctx, cancel: cancel, jobs: map[string]*Job{}, notices: map[string][]pending{}}
}

// Register adopts a process as a job of r.Owner.
func (m *Manager) Register(ctx context.Context, r Registration) (Snapshot, error) {
	if r.Owner == "" {
		return Snapshot{}, errors.New("jobs: a job needs an owner")
	}
	p, err := m.cfg.Open(ctx, r.Owner, r.Key, r.ProcessID)
	if err != nil {
		return Snapshot{}, fmt.Errorf("jobs: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Snapshot{}, errors.New("jobs: the host is shutting down")
	}
	live := 0
	for _, j := range m.jobs {
		if j.Owner == r.Owner && j.finished.IsZero() {
			live++
		}
	}
	if live >= m.cfg.MaxPerOwner {
		return Snapshot{}, fmt.Errorf("%w: %d jobs of %q are running (the cap); kill or wait for one first", ErrTooMany, live, r.Owner)
	}
	m.next++
	id := "j" + strconv.Itoa(m.next)
	if m.cfg.Handles != nil && m.cfg.Handles(r.Owner) {
		id = "j-" + randid.New()
	}
	j := &Job{
		ID:          id,
		Owner:       r.Owner,
		Command:     r.Command,
		Description: r.Description,
		Plugin:      r.Plugin,
		call:        r.Call,
		Started:     m.cfg.Now(),
		proc:        p,
		waited:      make(chan struct{}),
		state:       State{Status: Running},
	}
	m.jobs[j.ID] = j
	workdir := ""
	if f, ok := p.(Facts); ok {
		workdir = f.Workdir()
	}
	m.cfg.Logger.Info("job started", "entry", j.Plugin, "job", j.ID, "owner", j.Owner, "command", j.Command, "workdir", workdir, "pid", p.Pid())
	j.unwatch = p.AfterDone(func() { m.done(j) })
	m.changes.Fire()
	return m.snapshot(j), nil
}

// done begins the wait of a job whose process has finished: the executor
// says how it ended.
func (m *Manager) done(j *Job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.jobs[j.ID] != j || m.closed {
		close(j.waited) // dropped while this was on its way
		return
	}
	ctx, stop := context.WithCancel(m.ctx)
	j.stop = stop
	m.waits.Add(1)
	go m.watch(ctx, j)
}

// watch queues the completion notice and arms the retention timer.
func (m *Manager) watch(ctx context.Context, j *Job) {
	defer m.waits.Done()
	defer close(j.waited)
	st, ok := m.wait(ctx, j)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.jobs[j.ID] != j || m.closed {
		return
	}
	j.state = st
	j.finished = m.cfg.Now()
	m.logEnd(j, ended(st, j.killAsked), st)
	snap := m.snapshot(j)
	m.notices[j.Owner] = append(m.notices[j.Owner], pending{j.ID, j.Plugin, snap})
	j.timer = time.AfterFunc(m.cfg.Retention, func() { m.forget(j.ID) })
	m.changes.Fire()
}

// wait asks the executor how the job's process ended, again after a
// failure: the executor may be restarting or reloading. It gives up only
// when ctx ends (the job was forgotten or the manager closed).
func (m *Manager) wait(ctx context.Context, j *Job) (State, bool) {
	delay := waitRetryMin
	for {
		began := time.Now()
		st, err := j.proc.Wait(ctx)
		if err == nil && st.finished() {
			return st, true
		}
		if ctx.Err() != nil {
			return State{}, false
		}
		// A wait that was served a while before it was cut (a reload)
		// starts the backoff over.
		if time.Since(began) > waitRetryMax {
			delay = waitRetryMin
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return State{}, false
		case <-t.C:
		}
		delay = min(2*delay, waitRetryMax)
	}
}

// TakeNotices returns and clears owner's pending completion notices: the
// jobs that finished since the owner was last told, as facts (the tool
// that owns the model's view words them).
func (m *Manager) TakeNotices(owner string) []Snapshot {
	return m.take(owner, func(string) bool { return true })
}

// TakeNoticesFor is TakeNotices of the jobs plugin registered.
func (m *Manager) TakeNoticesFor(owner, plugin string) []Snapshot {
	return m.take(owner, func(p string) bool { return p == plugin })
}

// GiveBack returns notices TakeNoticesFor took for a call that then
// failed: they are told with the owner's next call instead, first.
func (m *Manager) GiveBack(owner, plugin string, snaps []Snapshot) {
	if len(snaps) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	back := make([]pending, 0, len(snaps)+len(m.notices[owner]))
	for _, s := range snaps {
		if _, ok := m.jobs[s.ID]; ok { // not forgotten meanwhile
			back = append(back, pending{s.ID, plugin, s})
		}
	}
	m.notices[owner] = append(back, m.notices[owner]...)
}

func (m *Manager) take(owner string, mine func(plugin string) bool) []Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Snapshot
	kept := m.notices[owner][:0]
	for _, n := range m.notices[owner] {
		if mine(n.plugin) {
			out = append(out, n.snap)
		} else {
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		delete(m.notices, owner)
	} else {
		m.notices[owner] = kept
	}
	return out
}

func (m *Manager) get(owner, id string) (*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if ok && j.Owner != owner {
		// Answered as an unknown id, word for word: a different answer
		// would confirm that another agent's job exists.
		ok = false
	}
	if !ok {
		return nil, fmt.Errorf("%w %q (finished jobs are forgotten once their final output was read)", ErrNotFound, id)
	}
	return j, nil
}

// Wait returns once owner's job id has ended (or was dropped), or with
// ctx's error.
func (m *Manager) Wait(ctx context.Context, owner, id string) error {
	j, err := m.get(owner, id)
	if err != nil {
		return err
	}
	select {
	case <-j.waited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Read consumes the job's new output. A read that returns the final output
// of a finished job forgets the job.
func (m *Manager) Read(ctx context.Context, owner, id string) (Snapshot, Output, error) {
	j, err := m.get(owner, id)
	if err != nil {
		return Snapshot{}, Output{}, err
	}
	before := written(j.proc)
	out, err := j.proc.ReadOutput(ctx)
	if err != nil {
		return Snapshot{}, Output{}, fmt.Errorf("read job %s: %w", id, err)
	}
	m.mu.Lock()
	// Reads may overlap: the later total stands.
	j.consumed = max(j.consumed, consumedBy(out, before))
	snap := m.snapshot(j)
	m.mu.Unlock()
	if out.State.finished() {
		snap.Status, snap.ExitCode, snap.Signal, snap.Limits = out.State.Status, out.State.ExitCode, out.State.Signal, out.State.Limits
		m.forget(id)
	} else {
		snap.Status, snap.ExitCode, snap.Signal, snap.Limits = Running, 0, "", nil
	}
	return snap, out, nil
}

// Kill terminates the job's tree; false once it had finished.
func (m *Manager) Kill(ctx context.Context, owner, id string) (bool, error) {
	j, err := m.get(owner, id)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	j.killAsked = true
	m.mu.Unlock()
	killed, err := j.proc.Kill(ctx)
	if err != nil {
		return false, fmt.Errorf("kill job %s: %w", id, err)
	}
	if killed {
		// The kill returns once the tree is signalled; the job is
		// finished once its wait says so. A read right after the kill
		// must not find it still running.
		t := time.NewTimer(killSettle)
		defer t.Stop()
		select {
		case <-j.waited:
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return killed, nil
}

// KillCall kills owner's running jobs that tool call call registered,
// through their executors, together, each bounded by ctx, and returns how
// many it signalled: the host's answer to a call that failed, whose job
// ids reached nobody. It returns once the trees are signalled, without
// waiting for them to end. The jobs stay, killed, until read.
func (m *Manager) KillCall(ctx context.Context, owner, call string) int {
	if call == "" {
		return 0
	}
	var js []*Job
	m.mu.Lock()
	for _, j := range m.jobs {
		if j.Owner == owner && j.call == call && j.finished.IsZero() {
			js = append(js, j)
		}
	}
	m.mu.Unlock()
	var n atomic.Int32
	var wg sync.WaitGroup
	for _, j := range js {
		wg.Add(1)
		go func() {
			defer wg.Done()
			killed, err := j.proc.Kill(ctx)
			if err != nil {
				// Released meanwhile, or its executor is gone: the
				// owner's end takes the process anyway.
				m.cfg.Logger.Debug("kill of a failed call's job", "owner", owner, "job", j.ID, "error", err)
			}
			if killed {
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(n.Load())
}

// written is what p printed so far, both streams; 0 when it cannot say.
func written(p Process) int64 {
	if f, ok := p.(Facts); ok {
		return f.Written()
	}
	return 0
}

// consumedBy is how much of the process's output a read took: the
// streams' totals when it took them, as its facts say. An executor that
// reports no totals leaves what was written before the read began, all
// of which the read took.
func consumedBy(out Output, before int64) int64 {
	return max(before, out.StdoutFacts.GetTotal()+out.StderrFacts.GetTotal())
}

// killSettle bounds how long Kill waits for a killed job to be seen
// finished (the tree gets SIGKILL after its grace).
const killSettle = 15 * time.Second

// List returns owner's jobs, oldest first: the running ones and the
// finished ones whose final output was not read yet.
func (m *Manager) List(owner string) []Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Snapshot
	for _, j := range m.jobs {
		if j.Owner == owner {
			out = append(out, m.snapshot(j))
		}
	}
	sort.Slice(out, func(a, b int) bool {
		return out[a].Started.Before(out[b].Started) || out[a].Started.Equal(out[b].Started) && out[a].ID < out[b].ID
	})
	return out
}

// ReleaseOwner kills and forgets every job of owner (its session ended).
// The kills run together, each bounded: the owner's processes are killed
// by ctx.subprocess too when it releases the owner.
func (m *Manager) ReleaseOwner(owner string) {
	m.mu.Lock()
	var gone []*Job
	for id, j := range m.jobs {
		if j.Owner == owner {
			if j.finished.IsZero() {
				m.logEnd(j, "job stopped: its session ended", State{})
			}
			gone = append(gone, j)
			m.drop(j)
			delete(m.jobs, id)
		}
	}
	delete(m.notices, owner)
	m.mu.Unlock()
	if len(gone) > 0 {
		m.changes.Fire()
	}
	var wg sync.WaitGroup
	for _, j := range gone {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
			defer cancel()
			_, _ = j.proc.Kill(ctx)
			j.proc.Forget()
		})
	}
	wg.Wait()
}

// Close forgets every job and waits for their waits to end;
// ctx.subprocess kills the processes.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	for id, j := range m.jobs {
		if j.finished.IsZero() {
			m.logEnd(j, "job stopped: the host is stopping", State{})
		}
		m.drop(j)
		delete(m.jobs, id)
	}
	m.mu.Unlock()
	m.changes.Fire()
	m.cancel()
	m.waits.Wait()
}

// drop ends a job's wait and its retention timer; m.mu is held.
func (m *Manager) drop(j *Job) {
	if j.unwatch() {
		close(j.waited) // its wait will never begin
	}
	if j.stop != nil {
		j.stop()
	}
	if j.timer != nil {
		j.timer.Stop()
	}
}

// forget drops a job, and its undelivered notice: whoever read its final
// output already knows it finished.
func (m *Manager) forget(id string) {
	m.mu.Lock()
	j, ok := m.jobs[id]
	if !ok {
		m.mu.Unlock()
		return
	}
	ns := m.notices[j.Owner][:0]
	for _, n := range m.notices[j.Owner] {
		if n.job != id {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		delete(m.notices, j.Owner)
	} else {
		m.notices[j.Owner] = ns
	}
	m.drop(j)
	delete(m.jobs, id)
	m.mu.Unlock()
	m.changes.Fire()
	j.proc.Forget()
}

// snapshot is j as its wait last saw it; m.mu is held.
func (m *Manager) snapshot(j *Job) Snapshot {
	return Snapshot{
		ID: j.ID, Owner: j.Owner, Command: j.Command, Description: j.Description, Started: j.Started,
		Pid: j.proc.Pid(), Status: j.state.Status, ExitCode: j.state.ExitCode, Signal: j.state.Signal,
		Limits: j.state.Limits, Finished: j.finished, Unread: max(written(j.proc)-j.consumed, 0),
	}
}

// ended words how a job's process ended.
func ended(st State, killAsked bool) string {
	switch {
	case st.Status == Completed:
		return "job finished"
	case killAsked:
		return "job killed at its owner's request"
	}
	return "job killed"
}

// logEnd logs the end of j: its exit status or signal, how long it ran
// and how much it printed; m.mu is held.
func (m *Manager) logEnd(j *Job, msg string, st State) {
	exit := ""
	switch {
	case st.Signal != "":
		exit = st.Signal
	case st.Status == Completed:
		exit = strconv.Itoa(st.ExitCode)
	}
	var limits []string
	for _, h := range st.Limits {
		limits = append(limits, h.GetLimit()+" ("+strconv.FormatInt(h.GetValue(), 10)+")")
	}
	args := []any{"entry", j.Plugin, "job", j.ID, "owner", j.Owner, "command", j.Command, "exit", exit, "limits", strings.Join(limits, "; ")}
	end := j.finished
	if end.IsZero() {
		end = m.cfg.Now()
	}
	args = append(args, "duration", end.Sub(j.Started).Round(time.Millisecond))
	if f, ok := j.proc.(Facts); ok {
		args = append(args, "output_bytes", f.Written())
	}
	m.cfg.Logger.Info(msg, args...)
}

// Listed is a job as All lists it: its state and its process's handle.
type Listed struct {
	Snapshot
	Proc Process
}

// All lists every owner's jobs, oldest first: what the person who runs
// the host sees of them (no agent gets this).
func (m *Manager) All() []Listed {
	m.mu.Lock()
	out := make([]Listed, 0, len(m.jobs))
	for _, j := range m.jobs {
		out = append(out, Listed{m.snapshot(j), j.proc})
	}
	m.mu.Unlock()
	sort.Slice(out, func(a, b int) bool {
		return out[a].Started.Before(out[b].Started) || out[a].Started.Equal(out[b].Started) && out[a].ID < out[b].ID
	})
	return out
}

// Job is owner's job id as it stands, and its process's handle, which
// stays usable once the job is forgotten (to look at what it printed,
// never to read it: Read is the owner's).
func (m *Manager) Job(owner, id string) (Listed, error) {
	j, err := m.get(owner, id)
	if err != nil {
		return Listed{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return Listed{m.snapshot(j), j.proc}, nil
}

// Changes signals (coalesced, once at once) whenever a job is
// registered, finishes or is forgotten; stop ends it.
func (m *Manager) Changes() (<-chan struct{}, func()) { return m.changes.Subscribe() }
