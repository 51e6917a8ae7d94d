package host

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/host/hub"
	"github.com/dshrun/dsh/host/jobtable"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
	"github.com/dshrun/dsh/sdk"
)

// ctx.jobs reaches each job's process through the executor that started
// it (the shell contract's ReadOutput, Kill and Wait), not through the
// process table: the executor is the process's one consuming reader, and
// it says what its process did (a sandbox's denials, a runner that
// failed). Each call goes to the key's current provider, so a job lives on
// across the executor's reloads and crashes. The end of the process is
// seen in the host's own table: the Wait is asked only then, so a running
// job holds no call on its executor (a call held open per job costs a
// stream and its goroutines on both sides, twice: the executor's Wait
// waits on ctx.subprocess's).

// openJobProcess is ctx.jobs' Open: the handle of process id, started by
// the provider of key, for owner.
func (h *Host) openJobProcess(_ context.Context, owner, key, id string) (jobtable.Process, error) {
	if key == "" {
		key = shell.Key
	}
	// The table says whose the process is, its pid and when it is done;
	// nothing is read from it.
	p, err := h.sub.Get(owner, id)
	if err != nil {
		return nil, err
	}
	ep, ok := h.endpoint(key)
	if !ok {
		return nil, sdk.HostError(codes.Unavailable, sdk.ReasonNotProvided, fmt.Sprintf("no provider of %q is active", key))
	}
	if !ep.services[shell.ServiceName] {
		return nil, sdk.HostError(codes.InvalidArgument, sdk.ReasonUnknownService, fmt.Sprintf("%q is provided by %q, which does not serve %s: it is no executor", key, ep.id, shell.ServiceName))
	}
	// Each call acts for owner, so the provider's own ctx.subprocess calls
	// carry owner and pass the owner check of the job's process. A Wait is
	// asked once the job's process is done and answers at once; one the
	// provider holds anyway must not hold up a reload: the old provider's
	// stop cuts it, and ctx.jobs asks the new one.
	conn := &hub.Conn{Router: routes{h}, Key: key, Owner: owner, Uncounted: shellv1.Shell_Wait_FullMethodName}
	c := shell.NewClient(conn, "")
	return &jobProcess{h: h, key: key, proc: c.Attach(id), sp: p}, nil
}

// jobProcess is a job's handle on its process.
type jobProcess struct {
	h    *Host
	key  string
	proc *shell.Process
	sp   *procs.Process // the table's, for its pid and its end
	// warned is set once a failed wait that is not the executor being away
	// was logged, until a wait succeeds.
	warned atomic.Bool
}

var _ jobtable.Process = (*jobProcess)(nil)

func (p *jobProcess) Pid() int { return p.sp.Pid }

func (p *jobProcess) AfterDone(f func()) func() bool { return p.sp.AfterDone(f) }

// Forget drops the finished process from ctx.subprocess's table (its spill
// files stay until its owner is released).
func (p *jobProcess) Forget() { p.h.sub.Forget(p.proc.ID) }

func (p *jobProcess) ReadOutput(ctx context.Context) (jobtable.Output, error) {
	r, err := p.proc.ReadOutput(ctx)
	if err != nil {
		return jobtable.Output{}, p.failed("read the output of", err)
	}
	st, err := jobStateOf(r.State)
	if err != nil {
		return jobtable.Output{}, err
	}
	return jobtable.Output{
		Stdout:      r.Stdout,
		Stderr:      r.Stderr,
		Lossy:       r.Lossy,
		StdoutSpill: r.StdoutSpillPath,
		StderrSpill: r.StderrSpillPath,
		StdoutFacts: factsOf(r.StdoutFacts),
		StderrFacts: factsOf(r.StderrFacts),
		Sandbox:     r.Sandbox,
		State:       st,
	}, nil
}

func (p *jobProcess) Kill(ctx context.Context) (bool, error) {
	killed, err := p.proc.Kill(ctx)
	if err != nil {
		return false, p.failed("kill", err)
	}
	return killed, nil
}

func (p *jobProcess) Wait(ctx context.Context) (jobtable.State, error) {
	r, err := p.proc.Wait(ctx)
	if err == nil {
		p.warned.Store(false)
		return jobStateOf(r)
	}
	// ctx.jobs asks again. An executor that is away (restarting, reloaded,
	// not yet provided) is expected; anything else is worth a word, once.
	away := errors.Is(err, sdk.ErrProviderGone) || errors.Is(err, sdk.ErrNotProvided) || ctx.Err() != nil || isCanceled(err)
	if !away && !p.warned.Swap(true) {
		p.h.log.Warn("cannot wait for a job's process through its executor; asking again", "key", p.key, "process", p.proc.ID, "error", err)
	}
	return jobtable.State{}, p.failed("wait for", err)
}

// failed words a failed call on the process for ctx.jobs' caller, keeping
// its kind (and status code) but not the client's words, which name the
// process id.
func (p *jobProcess) failed(op string, err error) error {
	var e *sdk.Error
	if errors.As(err, &e) {
		err = e
	}
	return fmt.Errorf("%s the process through ctx.%s: %w", op, p.key, err)
}

// isCanceled is a call cut as its provider's connection closed.
func isCanceled(err error) bool {
	var e *sdk.Error
	return errors.As(err, &e) && e.Code == codes.Canceled
}

// jobStateOf is an executor's process state in ctx.jobs' words.
func jobStateOf(s *shell.ProcessState) (jobtable.State, error) {
	st := jobtable.State{Status: jobtable.Status(s.GetStatus()), ExitCode: -1, Signal: s.GetSignal()}
	switch st.Status {
	case jobtable.Running, jobtable.Completed, jobtable.Killed:
	default:
		return jobtable.State{}, fmt.Errorf("the executor reported the process as %q, which is none of running, completed, killed", s.GetStatus())
	}
	if s.ExitCode != nil {
		st.ExitCode = int(*s.ExitCode)
	}
	st.Limits = s.GetLimits()
	return st, nil
}

// factsOf is a stream's facts as ctx.jobs reports them: the executor's,
// without the data, which a read carries in its own fields (an executor
// may have left it in). c is the read's own message, decoded for it.
func factsOf(c *shell.Collected) *shell.Collected {
	if c != nil {
		c.Data = nil
	}
	return c
}

var _ jobtable.Facts = (*jobProcess)(nil)

func (p *jobProcess) Workdir() string { return p.sp.Workdir() }

func (p *jobProcess) Written() int64 { return p.sp.Written() }
