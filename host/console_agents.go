package host

import (
	"context"
	"fmt"
	"time"

	"github.com/dshrun/dsh/host/jobtable"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/notify"
)

// What the console (the page of the person who runs the host) shows of
// the agents' background jobs and terminals, across owners. Nothing here
// consumes what an agent reads: a job's output and a terminal's are
// looked at, never read; a kill and typed input go the way the agent's
// own do.

// JobView is a background job as the console shows it.
type JobView struct {
	Owner, ID, Command string
	// State is running, completed or killed.
	State    string
	ExitCode int
	Started  time.Time
	// OutputBytes counts what it printed, both streams.
	OutputBytes int64
}

// TerminalView is a terminal session as the console shows it.
type TerminalView struct {
	Owner, ID, Command string
	Cols, Rows         int
	Alive              bool
}

// Jobs lists every owner's background jobs, oldest first.
func (h *Host) Jobs() []JobView {
	all := h.jobs.All()
	out := make([]JobView, 0, len(all))
	for _, l := range all {
		out = append(out, jobView(l))
	}
	return out
}

func jobView(l jobtable.Listed) JobView {
	v := JobView{Owner: l.Owner, ID: l.ID, Command: l.Command, State: string(l.Status), ExitCode: l.ExitCode, Started: l.Started}
	if f, ok := l.Proc.(jobtable.Facts); ok {
		v.OutputBytes = f.Written()
	}
	return v
}

// JobChanges signals (coalesced, once at once) whenever a job starts,
// finishes or goes, or a terminal session opens, ends or is closed; stop
// ends it.
func (h *Host) JobChanges() (<-chan struct{}, func()) {
	return notify.Join(h.jobs.Changes, h.terms.Changes)
}

// jobProcessOf is owner's job id and the host's handle on its process.
func (h *Host) jobProcessOf(owner, id string) (jobtable.Listed, *procs.Process, error) {
	l, err := h.jobs.Job(owner, id)
	if err != nil {
		return jobtable.Listed{}, nil, fmt.Errorf("job %s of %s: %w", id, owner, err)
	}
	jp, ok := l.Proc.(*jobProcess)
	if !ok {
		return jobtable.Listed{}, nil, fmt.Errorf("job %s of %s: its output is not in the host's process table", id, owner)
	}
	return l, jp.sp, nil
}

// WatchJobOutput hands out, through out, what owner's job id printed from
// its first byte, then as it comes (stdout and stderr as they come),
// without consuming any of it: the agent's job_output still gets all of
// it. It returns once the job has ended and all was handed out, with how
// it ended, or when ctx is done.
func (h *Host) WatchJobOutput(ctx context.Context, owner, id string, out func(chunk []byte)) (JobView, error) {
	l, p, err := h.jobProcessOf(owner, id)
	if err != nil {
		return JobView{}, err
	}
	if err := p.Follow(ctx, func(_ string, b []byte) { out(b) }); err != nil {
		return jobView(l), err
	}
	return h.jobEnd(ctx, l, p), nil
}

// jobEndWait bounds the wait for ctx.jobs to say how a finished job
// ended (its executor's Wait answers at once).
const jobEndWait = 5 * time.Second

// jobEnd is how a job whose process is done ended: as ctx.jobs reports it
// (its executor's word), or, once the job is forgotten (the agent read
// its end) or ctx.jobs is slow to tell, as the process table saw it.
func (h *Host) jobEnd(ctx context.Context, l jobtable.Listed, p *procs.Process) JobView {
	changes, stop := h.jobs.Changes()
	defer stop()
	t := time.NewTimer(jobEndWait)
	defer t.Stop()
	for waiting := true; waiting; {
		now, err := h.jobs.Job(l.Owner, l.ID)
		if err != nil {
			break // forgotten
		}
		if now.Status != jobtable.Running {
			return jobView(now)
		}
		select {
		case <-changes:
		case <-t.C:
			waiting = false
		case <-ctx.Done():
			waiting = false
		}
	}
	st, code, _ := p.State()
	v := jobView(l)
	v.State, v.ExitCode = string(st), code
	return v
}

// WaitJob waits until owner's job id has ended, or ctx is done.
func (h *Host) WaitJob(ctx context.Context, owner, id string) error {
	if err := h.jobs.Wait(ctx, owner, id); err != nil {
		return fmt.Errorf("job %s of %s: %w", id, owner, err)
	}
	return nil
}

// KillJob ends owner's job id and its whole process tree, as the agent's
// job_kill does (through the executor that started it); a job that had
// finished already is left as it is.
func (h *Host) KillJob(ctx context.Context, owner, id string) error {
	if _, err := h.jobs.Kill(ctx, owner, id); err != nil {
		return fmt.Errorf("kill job %s of %s: %w", id, owner, err)
	}
	return nil
}

// Terminals lists every owner's open terminal sessions, oldest first.
func (h *Host) Terminals() []TerminalView {
	all := h.terms.All()
	out := make([]TerminalView, 0, len(all))
	for _, l := range all {
		out = append(out, TerminalView{Owner: l.Owner, ID: l.ID, Command: l.Command, Cols: l.Cols, Rows: l.Rows, Alive: !l.Exited})
	}
	return out
}

// WatchTerminal hands out, through out, a repaint of owner's terminal
// session id as its screen stands, then the raw bytes its terminal prints
// (for a terminal such as xterm.js of the same size), consuming nothing
// the agent reads. It returns nil once the terminal's program has ended,
// or ctx's error when ctx is done.
func (h *Host) WatchTerminal(ctx context.Context, owner, id string, out func(chunk []byte)) error {
	err := h.terms.Watch(ctx, owner, id, out)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("terminal %s of %s: %w", id, owner, err)
	}
	return err
}

// WriteTerminal types data into owner's terminal session id as the
// agent's sends do (through the session's backend), without submitting
// it: an Enter is a carriage return in data.
func (h *Host) WriteTerminal(ctx context.Context, owner, id string, data []byte) error {
	if err := h.terms.Write(ctx, owner, id, data); err != nil {
		return fmt.Errorf("type into terminal %s of %s: %w", id, owner, err)
	}
	return nil
}
