// Package sandboxexec holds what every sandboxing executor adds to the local
// mechanics (package local): the per-call policy Resolve stamps from
// ctx.sandboxPolicy (with the hosts a call was approved to reach), each
// command confined through ctx.sandbox before it is spawned, and the
// sandbox facts of its result (the mode, the runner, the denials read from
// its errors, what the sandbox undid, the hosts its proxy reached and
// refused). An executor supplies its argv, as a local one does.
package sandboxexec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/shell"
)

// Executor is a shell.Executor that confines every command.
type Executor struct {
	*localexec.Executor
	Policy  *sandbox.Policy   // the composition's, read at Apply
	Sandbox sandbox.Sandboxes // ctx.sandbox

	mu      sync.Mutex
	jobs    map[string]*shell.SandboxPolicy // background processes' policies, for their reads
	settles map[*shell.ExecSpec]string      // each spawn's watch, from its confine to its end
	pending map[string]string               // background processes' watches, settled at their end
	settled map[string]*settling            // a background process's settle: run once, by Wait or the read that sees its end
}

var _ shell.Executor = (*Executor)(nil)

// New confines the commands of l under policy through sb.
func New(l *localexec.Executor, policy *sandbox.Policy, sb sandbox.Sandboxes) *Executor {
	e := &Executor{Executor: l, Policy: policy, Sandbox: sb, jobs: map[string]*shell.SandboxPolicy{},
		settles: map[*shell.ExecSpec]string{}, pending: map[string]string{}, settled: map[string]*settling{}}
	l.Confine = e.confine
	return e
}

// Mode is the policy's default mode: the sandboxMode fact.
func (e *Executor) Mode() string { return e.Policy.DefaultMode }

// Resolve stamps the complete per-call policy: the mode the request names
// (a caller that asked approval for it) or the default, every path from
// the composition's policy, and the hosts the request's network_allow
// names (a caller that asked approval for them). A request names no paths
// of its own.
func (e *Executor) Resolve(ctx context.Context, req *shell.ExecRequest) (*shell.ExecSpec, error) {
	spec, err := e.Executor.Resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	mode := req.GetSandboxPolicy().GetMode()
	switch mode {
	case "":
		mode = e.Policy.DefaultMode
	case sandbox.ReadOnly, sandbox.WorkspaceWrite, sandbox.DangerFullAccess:
	default:
		return nil, shell.Invalid(fmt.Sprintf("There is no sandbox mode %q: the modes are %s, %s and %s.", mode, sandbox.ReadOnly, sandbox.WorkspaceWrite, sandbox.DangerFullAccess))
	}
	allow := req.GetSandboxPolicy().GetNetworkAllow()
	for _, h := range allow {
		if err := sandbox.CheckHost(h, true); err != nil {
			return nil, shell.Invalid("network_allow: " + err.Error() + ".")
		}
	}
	spec.SandboxPolicy = e.stamp(mode)
	if !spec.SandboxPolicy.Network && len(allow) > 0 {
		spec.SandboxPolicy.NetworkAllow = slices.Clone(allow)
	}
	return spec, nil
}

func (e *Executor) stamp(mode string) *shell.SandboxPolicy { return stampOf(e.Policy, mode) }

// stampOf is the per-call policy of mode under base, as a spec carries it.
func stampOf(base *sandbox.Policy, mode string) *shell.SandboxPolicy {
	p := sandbox.ForMode(base, mode)
	sp := &shell.SandboxPolicy{Mode: mode, Network: p.Network, ProtectedPaths: p.ProtectedPaths, UnixSockets: p.UnixSockets, CacheRoots: p.CacheRoots}
	if p.WorkspaceRoot != "" {
		sp.WritableRoots = append([]string{p.WorkspaceRoot}, p.WritableRoots...)
	}
	return sp
}

// wrapPolicy is a per-call policy as ctx.sandbox takes it, under the
// composition's network rules (base's): the hosts the call was approved
// to reach are allowed besides them, and a composition without a network
// gets a proxied one, for this run, that reaches those hosts alone.
func wrapPolicy(sp *shell.SandboxPolicy, base *sandbox.NetworkRules) *sandbox.Policy {
	p := &sandbox.Policy{
		DefaultMode:    sp.Mode,
		Network:        sp.Network,
		ProtectedPaths: sp.ProtectedPaths,
		UnixSockets:    sp.UnixSockets,
		CacheRoots:     sp.CacheRoots,
	}
	if len(sp.WritableRoots) > 0 {
		p.WorkspaceRoot, p.WritableRoots = sp.WritableRoots[0], sp.WritableRoots[1:]
	}
	if !p.Network {
		switch {
		case base != nil:
			p.NetworkRules = proto.Clone(base).(*sandbox.NetworkRules)
		case len(sp.NetworkAllow) > 0:
			p.NetworkRules = &sandbox.NetworkRules{}
		}
		if p.NetworkRules != nil {
			p.NetworkRules.Allow = slices.Concat(p.NetworkRules.Allow, sp.NetworkAllow)
		}
	}
	return p
}

// policyOf is the spec's per-call policy; a spec that was not stamped
// (Run without Resolve) gets the default.
func (e *Executor) policyOf(spec *shell.ExecSpec) *shell.SandboxPolicy {
	if sp := spec.GetSandboxPolicy(); sp.GetMode() != "" {
		return sp
	}
	return e.stamp(e.Policy.DefaultMode)
}

// confine wraps the spawn through ctx.sandbox; danger-full-access runs as
// it is.
func (e *Executor) confine(ctx context.Context, spec *shell.ExecSpec, req *subprocessv1.SpawnRequest) (*shell.SandboxInfo, error) {
	sp := e.policyOf(spec)
	spec.SandboxPolicy = sp
	if sp.Mode == sandbox.DangerFullAccess {
		return &shell.SandboxInfo{Mode: sp.Mode, Enforcement: "none"}, nil
	}
	w, err := e.Sandbox.Wrap(ctx, &sandbox.WrapRequest{Argv: req.Argv, Mode: sp.Mode, Policy: wrapPolicy(sp, e.Policy.GetNetworkRules())})
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, shell.SandboxUnavailable(fmt.Sprintf("the sandbox cannot confine commands here, so nothing was run: %v", err))
		}
		return nil, fmt.Errorf("the sandbox could not be asked, so nothing was run: %w", err)
	}
	req.Argv, req.Confinement = w.Argv, w.Confinement
	if w.Settle != "" {
		e.mu.Lock()
		e.settles[spec] = w.Settle
		e.mu.Unlock()
	}
	return &shell.SandboxInfo{Mode: sp.Mode, Enforcement: w.Runner + ": " + w.Enforcement}, nil
}

// Run runs confined and reads the denials out of the result.
func (e *Executor) Run(ctx context.Context, spec *shell.ExecSpec) (*shell.RunResult, error) {
	res, err := e.Executor.Run(ctx, spec)
	if err == nil && launchFailed(res) && ctx.Err() == nil {
		// Nothing ran: most often a path the wrapper was to mount went
		// away in between (a unix socket its owner removed). Wrapped
		// again, it is no longer there to mount.
		if _, serr := e.settle(ctx, e.takeSettle(spec)); serr != nil {
			return nil, serr
		}
		res, err = e.Executor.Run(ctx, spec)
	}
	settled, serr := e.settle(ctx, e.takeSettle(spec))
	if err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	if launchFailed(res) {
		if msg := e.NotInstalled(spec); msg != "" {
			return nil, shell.CannotRun(msg) // the runner could not find the program either
		}
		return nil, shell.SandboxUnavailable("the sandbox runner failed to launch the command, so nothing was run: " + firstLine(res.Stderr.GetData()))
	}
	if res.Sandbox != nil {
		judge(res.Sandbox, e.policyOf(spec), spec.Workdir, res.Stderr.GetData(), res.ExitCode, res.Signal)
		reportSettled(res.Sandbox, settled)
	}
	return res, nil
}

func (e *Executor) takeSettle(spec *shell.ExecSpec) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	token := e.settles[spec]
	delete(e.settles, spec)
	return token
}

// settle asks ctx.sandbox to undo what the ended command created that it
// may not have, and what its proxy let it reach and refused. It runs even
// when the call was cancelled: the command ran.
func (e *Executor) settle(ctx context.Context, token string) (*sandbox.Settled, error) {
	if token == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	st, err := e.Sandbox.Settle(ctx, &sandbox.SettleRequest{Settle: token})
	if err != nil {
		return nil, fmt.Errorf("the command ran, but what it left could not be checked by the sandbox: %w", err)
	}
	return st, nil
}

// reportSettled makes what the sandbox undid, and the hosts its proxy
// refused, denials of the result; the hosts reached are facts too.
func reportSettled(info *shell.SandboxInfo, st *sandbox.Settled) {
	reportUndone(info, st.GetUndone())
	for _, h := range st.GetNetworkReached() {
		if !slices.Contains(info.NetworkReached, h) && len(info.NetworkReached) < 16 {
			info.NetworkReached = append(info.NetworkReached, h)
		}
	}
	for _, d := range st.GetNetworkDenied() {
		info.Denied = true
		if info.DenialSource == "" {
			info.DenialSource = "proxy"
		}
		if !slices.Contains(info.NetworkDenied, d.GetHost()) && len(info.NetworkDenied) < 16 {
			info.NetworkDenied = append(info.NetworkDenied, d.GetHost())
		}
	}
}

// reportUndone makes what the sandbox undid denials of the result.
func reportUndone(info *shell.SandboxInfo, undone []*sandbox.Undone) {
	for _, u := range undone {
		info.Denied = true
		if info.DenialSource == "" {
			info.DenialSource = "undone"
		}
		if !slices.Contains(info.DeniedPaths, u.GetPath()) && len(info.DeniedPaths) < 16 {
			info.DeniedPaths = append(info.DeniedPaths, u.GetPath())
		}
	}
}

// Exec is Resolve then Run (this executor's, not the local one's).
func (e *Executor) Exec(ctx context.Context, req *shell.ExecRequest) (*shell.RunResult, error) {
	spec, err := e.Resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.Run(ctx, spec)
}

// Start runs confined in the background; its reads carry its denials.
func (e *Executor) Start(ctx context.Context, spec *shell.ExecSpec) (*shell.Started, error) {
	st, err := e.Executor.Start(ctx, spec)
	token := e.takeSettle(spec)
	if err != nil {
		if _, serr := e.settle(ctx, token); serr != nil {
			return nil, errors.Join(err, serr)
		}
		return nil, err
	}
	e.mu.Lock()
	e.jobs[st.Id] = e.policyOf(spec)
	if token != "" {
		e.pending[st.Id] = token
	}
	e.mu.Unlock()
	return st, nil
}

// ReadOutput adds the sandbox facts of what this read returned. A process
// started before a reload of the executor is judged under the default
// policy.
func (e *Executor) ReadOutput(ctx context.Context, id string) (*shell.ProcessRead, error) {
	r, err := e.Executor.ReadOutput(ctx, id)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	sp, ok := e.jobs[id]
	e.mu.Unlock()
	var settled *sandbox.Settled
	if ok && r.GetState().GetStatus() != shell.StatusRunning {
		// The end may be seen here and by Wait at once: both meet the one
		// settle, so what it undid is said however the two interleave.
		if settled, err = e.settleJob(ctx, id); err != nil {
			return nil, err
		}
		e.mu.Lock()
		delete(e.jobs, id)
		delete(e.settled, id)
		e.mu.Unlock()
	}
	if !ok {
		sp = e.stamp(e.Policy.DefaultMode)
	}
	if sp.Mode == sandbox.DangerFullAccess {
		return r, nil
	}
	r.Sandbox = &shell.SandboxInfo{Mode: sp.Mode}
	var code *int32
	if st := r.GetState(); st != nil {
		code = st.ExitCode
	}
	judge(r.Sandbox, sp, "", r.Stderr, code, r.GetState().GetSignal())
	reportSettled(r.Sandbox, settled)
	return r, nil
}

// Wait settles a background process that ended: what it left is undone
// before anyone is told it ended; the next read says what.
func (e *Executor) Wait(ctx context.Context, id string) (*shell.ProcessState, error) {
	st, err := e.Executor.Wait(ctx, id)
	if err != nil || st.GetStatus() == shell.StatusRunning {
		return st, err
	}
	if _, err := e.settleJob(ctx, id); err != nil {
		return nil, err
	}
	return st, nil
}

// settling is one background process's settle, shared by whoever saw its
// end first and whoever comes while it runs.
type settling struct {
	done    chan struct{}
	settled *sandbox.Settled
	err     error
}

// settleJob settles the ended background process id once; the read that
// reports its end says what was undone (and forgets it).
func (e *Executor) settleJob(ctx context.Context, id string) (*sandbox.Settled, error) {
	e.mu.Lock()
	s, ok := e.settled[id]
	if !ok {
		token, watched := e.pending[id]
		if !watched {
			// Nothing to settle, or it was settled and said already.
			e.mu.Unlock()
			return nil, nil
		}
		s = &settling{done: make(chan struct{})}
		e.settled[id] = s
		delete(e.pending, id)
		e.mu.Unlock()
		s.settled, s.err = e.settle(ctx, token)
		close(s.done)
		return s.settled, s.err
	}
	e.mu.Unlock()
	select {
	case <-s.done:
		return s.settled, s.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
