// Package jobs is ctx.jobs: background jobs on top of ctx.subprocess. It
// owns job ids, the owner of each job (an agent), consuming reads, kill,
// the per-owner cap on live jobs, completion notices for the owner, and
// forgetting finished jobs once their final output is read or after a
// retention period. Processes stay ctx.subprocess's: a job outlives the
// plugin (and the executor) that started it and dies with the composition.
package jobs

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/dshrun/dsh/host/core/subprocess"
)

// Defaults.
const (
	DefaultMaxPerOwner = 16
	DefaultRetention   = 30 * time.Minute
)

// Errors a caller can branch on.
var (
	ErrNotFound = errors.New("no such job")
	ErrForeign  = errors.New("job belongs to another owner")
	ErrTooMany  = errors.New("too many live jobs")
)

// Config configures a Manager.
type Config struct {
	Sub *subprocess.Manager
	// MaxPerOwner caps live (running) jobs per owner; 0 means 16.
	MaxPerOwner int
	// Retention is how long a finished job stays readable when nobody
	// reads its final output; 0 means 30 minutes.
	Retention time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Manager holds jobs. Safe for concurrent use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	next    int
	jobs    map[string]*Job
	notices map[string][]pending // owner -> completion notices not yet delivered
	closed  bool
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
	proc                            *subprocess.Process
	finished                        time.Time
	timer                           *time.Timer
}

// Snapshot is a job's state.
type Snapshot struct {
	ID, Owner, Command, Description string
	Started                         time.Time
	Pid                             int
	Status                          subprocess.Status
	ExitCode                        int
	Signal                          string
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
	return &Manager{cfg: cfg, jobs: map[string]*Job{}, notices: map[string][]pending{}}
}

// Register adopts the process with id processID as a job of owner.
func (m *Manager) Register(owner, processID, command, description string) (Snapshot, error) {
	return m.RegisterBy("", owner, processID, command, description)
}

// RegisterBy is Register for plugin (an entry id), whose tool calls are then
// told when the job finishes (TakeNoticesFor).
func (m *Manager) RegisterBy(plugin, owner, processID, command, description string) (Snapshot, error) {
	if owner == "" {
		return Snapshot{}, errors.New("jobs: a job needs an owner")
	}
	// Only a process of the same owner can become its job.
	p, err := m.cfg.Sub.Get(owner, processID)
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
		if j.Owner == owner && j.finished.IsZero() {
			live++
		}
	}
	if live >= m.cfg.MaxPerOwner {
		return Snapshot{}, fmt.Errorf("%w: %d jobs of %q are running (the cap); kill or wait for one first", ErrTooMany, live, owner)
	}
	m.next++
	j := &Job{
		ID:          "j" + strconv.Itoa(m.next),
		Owner:       owner,
		Command:     command,
		Description: description,
		Plugin:      plugin,
		Started:     m.cfg.Now(),
		proc:        p,
	}
	m.jobs[j.ID] = j
	go m.watch(j)
	return m.snapshot(j), nil
}

// watch queues the completion notice and arms the retention timer.
func (m *Manager) watch(j *Job) {
	<-j.proc.Done()
	r := j.proc.Result()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.jobs[j.ID]; !ok || m.closed {
		return
	}
	j.finished = m.cfg.Now()
	snap := m.snapshot(j)
	snap.Status, snap.ExitCode, snap.Signal = r.Status, r.ExitCode, r.Signal
	m.notices[j.Owner] = append(m.notices[j.Owner], pending{j.ID, j.Plugin, snap})
	j.timer = time.AfterFunc(m.cfg.Retention, func() { m.forget(j.ID) })
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
	j, ok := m.jobs[id]
	if !ok {
		return nil, fmt.Errorf("%w %q (finished jobs are forgotten once their final output was read)", ErrNotFound, id)
	}
	if j.Owner != owner {
		return nil, fmt.Errorf("%w: %q", ErrForeign, id)
	}
	return j, nil
}

// Read consumes the job's new output. A read that returns the final output
// of a finished job forgets the job.
func (m *Manager) Read(owner, id string) (Snapshot, subprocess.Read, error) {
	m.mu.Lock()
	j, err := m.get(owner, id)
	m.mu.Unlock()
	if err != nil {
		return Snapshot{}, subprocess.Read{}, err
	}
	r := j.proc.Read()
	snap := m.snapshotLocked(j)
	snap.Status, snap.ExitCode, snap.Signal = r.Status, r.ExitCode, r.Signal
	if r.Status != subprocess.Running {
		m.forget(id)
	}
	return snap, r, nil
}

// Kill terminates the job's tree; false once it had finished.
func (m *Manager) Kill(owner, id string) (bool, error) {
	m.mu.Lock()
	j, err := m.get(owner, id)
	m.mu.Unlock()
	if err != nil {
		return false, err
	}
	return j.proc.Kill(), nil
}

// List returns owner's jobs, oldest first.
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
func (m *Manager) ReleaseOwner(owner string) {
	m.mu.Lock()
	var ps []*subprocess.Process
	for id, j := range m.jobs {
		if j.Owner == owner {
			ps = append(ps, j.proc)
			if j.timer != nil {
				j.timer.Stop()
			}
			delete(m.jobs, id)
			m.cfg.Sub.Forget(j.proc.ID)
		}
	}
	delete(m.notices, owner)
	m.mu.Unlock()
	for _, p := range ps {
		p.Kill()
	}
}

// Close forgets every job; ctx.subprocess kills the processes.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for id, j := range m.jobs {
		if j.timer != nil {
			j.timer.Stop()
		}
		delete(m.jobs, id)
	}
}

// forget drops a job, and its undelivered notice: whoever read its final
// output already knows it finished.
func (m *Manager) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j, ok := m.jobs[id]; ok {
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
		if j.timer != nil {
			j.timer.Stop()
		}
		delete(m.jobs, id)
		m.cfg.Sub.Forget(j.proc.ID)
	}
}

func (m *Manager) snapshotLocked(j *Job) Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshot(j)
}

func (m *Manager) snapshot(j *Job) Snapshot {
	s := Snapshot{ID: j.ID, Owner: j.Owner, Command: j.Command, Description: j.Description, Started: j.Started, Pid: j.proc.Pid}
	s.Status, s.ExitCode, s.Signal = j.proc.State()
	return s
}
