package procs

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/dshrun/dsh/core/output/outputv1"
	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Service is ctx.subprocess for one plugin: a Manager's processes, as the
// core/subprocess seam's Processes. Caller is that plugin's entry id.
// Serving tells, for a request, the agent whose call it serves and that
// call (stamped by the host); a request that serves none acts for the
// plugin itself. The owner a request names is not used: no plugin chooses
// whom a process belongs to.
type Service struct {
	M       *Manager
	Caller  string
	Serving seam.Serving
	// Confinement, if set, finds the confinement a request names (made
	// ready by ctx.sandbox). Without it, or for a name it does not know,
	// a request with a confinement is refused.
	Confinement func(token string) (func() error, error)
	// ConfinementEnv, if set, is what the environment of a command
	// spawned under a confinement must hold (its TMPDIR): set over the
	// request's explicit variables.
	ConfinementEnv func(token string) map[string]string
}

var _ subprocess.Processes = (*Service)(nil)

// served is whom the request acts for, and the call it serves ("" for
// none: a front end finds a running call's output by it).
func (s *Service) served(ctx context.Context) (owner, call string) {
	if sv, ok := s.Serving.Of(ctx); ok {
		return sv.Owner, sv.Call
	}
	return s.Caller, ""
}

func (s *Service) spec(ctx context.Context, req *subprocess.SpawnRequest) (Spec, error) {
	owner, call := s.served(ctx)
	spec := Spec{
		Argv:            req.Argv,
		Dir:             req.Dir,
		Env:             req.Env,
		Owner:           owner,
		Call:            call,
		Timeout:         time.Duration(req.TimeoutMs) * time.Millisecond,
		Grace:           time.Duration(req.GraceMs) * time.Millisecond,
		MaxOutputBytes:  int(req.MaxOutputBytes),
		MaxSpillBytes:   req.MaxSpillBytes,
		SpillAfterBytes: int(min(req.SpillAfterBytes, 1<<40)),
		Limits:          Limits{Processes: req.MaxProcesses, MemoryBytes: req.MaxMemoryBytes},
		Script:          req.Script,
	}
	if req.HasStdin {
		spec.Stdin = req.Stdin
		if spec.Stdin == nil {
			spec.Stdin = []byte{}
		}
	}
	if req.Confinement != "" {
		confine, err := s.confinement(req.Confinement)
		if err != nil {
			return spec, err
		}
		spec.Confine = confine
		spec.Env = s.confinedEnv(req.Confinement, spec.Env)
	}
	return spec, nil
}

// confinedEnv is env with what the confinement token sets over it.
func (s *Service) confinedEnv(token string, env map[string]string) map[string]string {
	if s.ConfinementEnv == nil {
		return env
	}
	set := s.ConfinementEnv(token)
	if len(set) == 0 {
		return env
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, set)
	return out
}

// confinement is what applies the confinement token names, or why the
// spawn is refused.
func (s *Service) confinement(token string) (func() error, error) {
	if s.Confinement == nil {
		return nil, subprocess.SandboxUnavailable(errors.New("this host confines no commands"))
	}
	confine, err := s.Confinement(token)
	if err != nil {
		return nil, subprocess.SandboxUnavailable(err)
	}
	return confine, nil
}

// errCancelledRun is a Run whose call was cancelled before it began.
var errCancelledRun = seam.New(context.Canceled, "run: the call was already cancelled")

func (s *Service) Run(ctx context.Context, req *subprocess.SpawnRequest) (*subprocess.Result, error) {
	if ctx.Err() != nil {
		return nil, errCancelledRun
	}
	spec, err := s.spec(ctx, req)
	if err != nil {
		return nil, err
	}
	// The call's context is the caller's abort: if the caller goes away
	// (cancels, or its process dies), the command's tree is killed.
	spec.Abort = ctx
	p, err := s.M.Run(spec)
	if err != nil {
		return nil, spawnError(err)
	}
	s.M.Forget(p.ID)
	return ResultProto(p.Result()), nil
}

func (s *Service) Start(ctx context.Context, req *subprocess.SpawnRequest) (*subprocess.Started, error) {
	spec, err := s.spec(ctx, req)
	if err != nil && !req.SettleFailure {
		return nil, err
	}
	spec.Timeout = 0 // background processes have no timeout
	spec.Detached = true
	if err != nil {
		// Settled, with the reason on stderr: nothing runs unconfined.
		p := s.M.Settled(spec, err)
		return &subprocess.Started{Id: p.ID, SandboxFailed: true}, nil
	}
	if req.SettleFailure {
		p, err := s.M.Spawn(spec)
		if err != nil {
			p = s.M.Settled(spec, err)
		}
		return &subprocess.Started{Id: p.ID, Pid: int32(p.Pid), SandboxFailed: errors.Is(err, ErrConfine)}, nil
	}
	p, err := s.M.Spawn(spec)
	if err != nil {
		return nil, spawnError(err)
	}
	return &subprocess.Started{Id: p.ID, Pid: int32(p.Pid)}, nil
}

func (s *Service) get(ctx context.Context, id string) (*Process, error) {
	owner, _ := s.served(ctx)
	return s.getOwned(owner, id)
}

// getOwned is owner's process id.
func (s *Service) getOwned(owner, id string) (*Process, error) {
	p, err := s.M.Get(owner, id)
	if err != nil {
		return nil, subprocess.NotFound(err)
	}
	return p, nil
}

func (s *Service) Read(ctx context.Context, id string) (*subprocess.ReadResult, error) {
	p, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	r := p.Read()
	resp := &subprocess.ReadResult{
		Stdout: collectedProto(r.Stdout),
		Stderr: collectedProto(r.Stderr),
		Lossy:  r.Lossy,
		Status: statusProto(r.Status),
		Signal: r.Signal,
		Limits: r.Limits,
	}
	if r.Status == Completed {
		code := int32(r.ExitCode)
		resp.ExitCode = &code
	}
	return resp, nil
}

func (s *Service) Kill(ctx context.Context, id string) (bool, error) {
	p, err := s.get(ctx, id)
	if err != nil {
		return false, err
	}
	return p.Kill(), nil
}

func (s *Service) Wait(ctx context.Context, id string) (*subprocess.Result, error) {
	p, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return ResultProto(p.Result()), nil
}

// spawnError is a failed spawn in the seam's words: what the Manager
// refuses to start is ErrCannotStart, anything else is the host's failure.
func spawnError(err error) error {
	if errors.Is(err, ErrConfine) {
		return subprocess.SandboxUnavailable(err)
	}
	var se *Error
	if errors.As(err, &se) {
		return subprocess.CannotStart(err)
	}
	return err
}

// ResultProto converts a Result for the wire.
func ResultProto(r Result) *subprocessv1.Result {
	out := &subprocessv1.Result{
		Status:     statusProto(r.Status),
		Signal:     r.Signal,
		TimedOut:   r.TimedOut,
		Aborted:    r.Aborted,
		DurationMs: r.Duration.Milliseconds(),
		Stdout:     collectedProto(r.Stdout),
		Stderr:     collectedProto(r.Stderr),
		Limits:     r.Limits,
	}
	if r.Signal == "" {
		code := int32(r.ExitCode)
		out.ExitCode = &code
	}
	return out
}

// collectedProto is a stream's output as every contract that hands it
// over carries it (ctx.subprocess here, ctx.shell and ctx.jobs after).
func collectedProto(c Collected) *outputv1.Collected {
	return &outputv1.Collected{
		Data:          c.Data,
		Total:         c.Total,
		Truncated:     c.Truncated,
		Dropped:       c.Dropped,
		DroppedLines:  c.DroppedLines,
		SpillPath:     c.SpillPath,
		SpillBytes:    c.SpillBytes,
		SpillComplete: c.SpillComplete,
		SpillReason:   string(c.SpillReason),
		SpillError:    c.SpillError,
	}
}

func statusProto(s Status) subprocessv1.Status {
	switch s {
	case Running:
		return subprocessv1.Status_STATUS_RUNNING
	case Completed:
		return subprocessv1.Status_STATUS_COMPLETED
	case Killed:
		return subprocessv1.Status_STATUS_KILLED
	}
	return subprocessv1.Status_STATUS_UNSPECIFIED
}
