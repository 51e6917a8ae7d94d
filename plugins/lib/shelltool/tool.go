// Package shelltool is the model-facing shell tool the shell tool plugins
// (dsh-tool-bash, dsh-tool-pwsh) serve: it registers the tool that runs a
// command, `job_output`, `job_kill` and `job_list` with ctx.tools, runs
// commands through ctx.shell (whichever executor is composed), hands
// background processes to ctx.jobs, and gives each execution one trusted
// DSH_* snapshot from ctx.shellEnv. It owns every word the model reads
// about commands but those written for one shell, which a Shell gives.
package shelltool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/core/jobs"
	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/plugins/shellenv"
	"github.com/dshrun/dsh/sdk"
)

// Shell is what one shell tool says of its shell: its names and the words
// written for it. Everything else the shell tools share.
type Shell struct {
	Plugin  string // the plugin's name: "tool-bash"
	Version string
	Summary string // the plugin's summary
	Tool    string // the tool's name: "bash"
	Title   string // the tool's title: "Run a bash command"
	Command string // what the command argument is: "The bash command to run."
	// ChangeDir is the shell's command that changes directory, which the
	// workdir argument replaces: "cd".
	ChangeDir string
	// Session is what each call runs in: "a fresh shell".
	Session string
	// Intro opens the tool's description: what it runs, what each call
	// runs in (session: Session, and where it starts when the executor
	// says), and what the shell needs said. The lines every shell tool
	// shares follow it.
	Intro func(session string) string
	// ReadSpill names the commands that read a spill file: "grep, sed -n, tail".
	ReadSpill string
	// ReadBinary says how to read binary output a result does not show:
	// "pipe it through xxd or od to read it".
	ReadBinary string
}

// Tool is a shell tool plugin: New(shell) is what its main serves.
type Tool struct {
	def  Shell // what the tool says of its shell
	log  hclog.Logger
	sh   *shell.Client
	env  *shellenv.Follower
	jobs *jobs.Client
	// maxChars is the model budget of one result, in characters.
	maxChars int
	approver approval.Approver // ctx.approval, for escalations
	// network is set when the sandbox gives commands the whole network:
	// no host needs asking for.
	network bool
}

// New is the plugin of the tool s describes.
func New(s Shell) *Tool { return &Tool{def: s} }

func (p *Tool) Describe() sdk.Description {
	return sdk.Description{
		Name:    p.def.Plugin,
		Version: p.def.Version,
		Summary: p.def.Summary,
		Inject: []sdk.Inject{
			{Key: shell.Key}, {Key: shellenv.Key}, {Key: jobs.Key}, {Key: tools.Key}, {Key: approval.Key}, {Key: sandbox.PolicyKey},
		},
		ConfigSchema: sdk.SchemaOf[config](),
		Tools:        []string{p.def.Tool, "job_output", "job_kill", "job_list"},
	}
}

var _ tools.Handler = (*Tool)(nil)

func (p *Tool) Register(s *grpc.Server) {
	toolsv1.RegisterToolHandlerServer(s, tools.NewHandlerServer(p))
}

func (p *Tool) Dispose(context.Context) error {
	if p.env != nil {
		p.env.Close()
	}
	return nil
}

// config is a shell tool's config.
type config struct {
	// MaxOutputChars is the model budget of one result (stdout and stderr
	// together); the executor's maxOutputBytes is what it retains.
	MaxOutputChars int `json:"maxOutputChars" minimum:"100" desc:"characters of output one result shows, stdout and stderr together (30000)"`
}

func (p *Tool) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return err
	}
	p.maxChars = cfg.MaxOutputChars
	if p.maxChars <= 0 {
		p.maxChars = DefaultMaxOutputChars
	}
	p.log = host.Logger()
	svc, err := host.Lookup(ctx, shell.Key)
	if err != nil {
		return err
	}
	mode := shell.SandboxMode(svc.Facts[shell.FactSandboxMode])
	var policy *sandbox.Policy
	if mode != "" {
		// A confining executor: escalation is advertised, so the policy
		// it is asked under must be there; its folders go into the
		// description.
		if policy, err = sandbox.NewClient(host.Conn(sandbox.PolicyKey)).Get(ctx); err != nil {
			return fmt.Errorf("the executor sandboxes (%s mode), and the sandbox policy cannot be read: %w", mode, err)
		}
	}
	p.network = policy.GetNetwork()
	p.sh = shell.NewClient(host.Conn(shell.Key), mode)
	// Every command needs the DSH_* snapshot: following it keeps a round
	// trip (two hops through the host) off each call.
	p.env = shellenv.NewClient(host.Conn(shellenv.Key)).Follow()
	p.jobs = jobs.NewClient(host.Conn(jobs.Key))
	p.approver = approval.NewClient(host.Conn(approval.Key))
	// The executor's own defaults go into the description the model reads.
	lim, err := p.sh.Limits(ctx)
	if err != nil {
		return fmt.Errorf("ask the executor for its defaults: %w", err)
	}
	return tools.Register(ctx, host.Conn(tools.Key), p.def.Specs(mode, PlaceOf(lim.Workdir, policy), lim.TimeoutMs, lim.MaxTimeoutMs, p.maxChars)...)
}

// runArgs are the arguments of the tool that runs a command (validated by
// the host against the schema before they get here).
type runArgs struct {
	Command            string   `json:"command"`
	Description        string   `json:"description"`
	TimeoutMs          int64    `json:"timeoutMs"`
	Workdir            string   `json:"workdir"`
	RunInBackground    bool     `json:"run_in_background"`
	SandboxPermissions string   `json:"sandbox_permissions"`
	NetworkHosts       []string `json:"network_hosts"`
	Justification      string   `json:"justification"`
}

type jobArgs struct {
	JobID string `json:"job_id"`
}

func (p *Tool) Call(ctx context.Context, req *toolsv1.CallRequest) (*toolsv1.CallResult, error) {
	res, err := p.call(ctx, req)
	if err != nil {
		return nil, err
	}
	// Jobs that finished since the previous call come with this one (the
	// host takes them before the call, so one that ends during it is told
	// next time, or not at all once its final output was read). They are
	// told first, so the exit marker stays last; a call about a job says
	// nothing more of it, and a list says how every listed job ended.
	if req.Name == "job_list" && !res.IsError {
		return res, nil
	}
	var a jobArgs
	if req.Name != p.def.Tool {
		_ = json.Unmarshal(req.Arguments, &a)
	}
	var finished []*jobsv1.Job
	for _, j := range req.FinishedJobs {
		if j.Id != a.JobID {
			finished = append(finished, j)
		}
	}
	if len(finished) > 0 {
		res.Text = withNotices(renderNotices(finished), res.Text)
	}
	return res, nil
}

func (p *Tool) call(ctx context.Context, req *toolsv1.CallRequest) (*toolsv1.CallResult, error) {
	switch req.Name {
	case p.def.Tool:
		var a runArgs
		if err := json.Unmarshal(req.Arguments, &a); err != nil {
			return errorResult("bad arguments: %v", err), nil
		}
		return p.run(ctx, req.Owner, a), nil
	case "job_output", "job_kill":
		var a jobArgs
		if err := json.Unmarshal(req.Arguments, &a); err != nil {
			return errorResult("bad arguments: %v", err), nil
		}
		if req.Name == "job_output" {
			return p.jobOutput(ctx, req.Owner, a.JobID), nil
		}
		return p.jobKill(ctx, req.Owner, a.JobID), nil
	case "job_list":
		return p.jobList(ctx), nil
	}
	return errorResult("%s has no tool %q", p.def.Plugin, req.Name), nil
}

// errorResult is a call that could not do what it was asked: one line, in
// brackets, that names the thing.
func errorResult(format string, args ...any) *toolsv1.CallResult {
	return &toolsv1.CallResult{Text: "[" + fmt.Sprintf(format, args...) + "]", IsError: true}
}

// run runs one command, in the foreground or as a background job.
func (p *Tool) run(ctx context.Context, owner string, a runArgs) *toolsv1.CallResult {
	policy, refused := p.escalate(ctx, a)
	if refused != nil {
		return refused
	}
	snap, err := p.env.Snapshot(ctx)
	if err != nil {
		return errorResult("the DSH_* environment could not be read, so nothing was run: %s", failure(err))
	}
	if snap.Stale {
		p.log.Warn("ctx.shellEnv is unreachable; the command gets the last DSH_* snapshot", "owner", owner, "generation", snap.Generation)
	}
	req := &shell.ExecRequest{
		// A stream the budget may cut spills to a file from the start.
		SpillAfterBytes: int64(p.maxChars / 2),
		Command:         a.Command,
		Workdir:         a.Workdir,
		TimeoutMs:       a.TimeoutMs,
		Owner:           owner,
		DshEnv:          snap.Env,
		SandboxPolicy:   policy,
	}
	if a.RunInBackground {
		spec, err := p.sh.Resolve(ctx, req)
		if err != nil {
			return errorResult("%s", failure(err))
		}
		proc, err := p.sh.StartProcess(ctx, spec)
		if err != nil {
			return errorResult("%s", failure(err))
		}
		job, err := p.jobs.Register(ctx, &jobs.RegisterRequest{ProcessId: proc.ID, ShellKey: shell.Key, Command: a.Command, Description: a.Description})
		if err != nil {
			_, _ = proc.Kill(context.WithoutCancel(ctx))
			return errorResult("%s", failure(err))
		}
		// ctx.jobs logs the job's start and its end.
		if proc.Sandbox.GetRunnerFailed() {
			// Settled as killed: the job's output says why.
			return &toolsv1.CallResult{Text: strings.Join(append([]string{renderStarted(job)}, sandboxMarkers(proc.Sandbox)...), "\n"), Structured: jobStructured(job, nil), IsError: true}
		}
		return &toolsv1.CallResult{Text: renderStarted(job), Structured: jobStructured(job, nil)}
	}
	start := time.Now()
	res, err := p.sh.Exec(ctx, req)
	if err != nil {
		switch {
		case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
			// The host logs the cancelled call at info.
			p.log.Debug("command cancelled", "owner", owner, "command", a.Command, "after", time.Since(start).Round(time.Millisecond).String())
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
			p.log.Info("command stopped: the call ran out of time", "owner", owner, "command", a.Command, "after", time.Since(start).Round(time.Millisecond).String())
		default:
			p.log.Info("command could not run", "owner", owner, "command", a.Command, "workdir", a.Workdir, "error", failure(err))
		}
		return errorResult("%s", failure(err))
	}
	exit := "0"
	switch {
	case res.Signal != "":
		exit = res.Signal
	case res.ExitCode != nil:
		exit = fmt.Sprint(*res.ExitCode)
	}
	ended := "command finished"
	switch {
	case res.TimedOut:
		ended = "command timed out"
	case res.Aborted:
		ended = "command aborted"
	}
	p.log.Info(ended, "owner", owner, "command", a.Command, "workdir", res.Workdir, "exit", exit,
		"duration", time.Since(start).Round(time.Millisecond).String())
	text, out, errs := renderRun(res, p.maxChars, p.def.ReadBinary)
	return &toolsv1.CallResult{Text: text, Structured: runStructured(res, out, errs), IsError: runFailed(res), Resources: resources(out, errs)}
}

func (p *Tool) jobOutput(ctx context.Context, owner, id string) *toolsv1.CallResult {
	r, err := p.jobs.Read(ctx, id)
	if err != nil {
		return errorResult("%s", failure(err))
	}
	failed := r.Job.Status != shell.StatusRunning && (r.Job.ExitCode == nil || *r.Job.ExitCode != 0)
	text, out, errs := renderRead(r, p.maxChars, p.def.ReadBinary)
	return &toolsv1.CallResult{Text: text, Structured: jobStructured(r.Job, r, out, errs), IsError: failed, Resources: resources(out, errs)}
}

func (p *Tool) jobKill(ctx context.Context, owner, id string) *toolsv1.CallResult {
	killed, err := p.jobs.Kill(ctx, id)
	if err != nil {
		return errorResult("%s", failure(err))
	}
	if !killed {
		return &toolsv1.CallResult{Text: "[job " + id + " had already finished; read its output with job_output]"}
	}
	// ctx.jobs logs the kill with the job's end.
	return &toolsv1.CallResult{Text: "[job " + id + " killed; its final output is readable with job_output]"}
}

// jobList lists the caller's jobs: ctx.jobs answers with the jobs of the
// agent whose call this is, never another's.
func (p *Tool) jobList(ctx context.Context) *toolsv1.CallResult {
	list, err := p.jobs.List(ctx)
	if err != nil {
		return errorResult("%s", failure(err))
	}
	now := time.Now()
	return &toolsv1.CallResult{Text: renderList(list, now), Structured: listStructured(list, now)}
}

// escalate asks ctx.approval for a run with more access than the
// executor's sandbox gives, before anything runs: a mode with more access
// (sandbox_permissions), then hosts beyond the network rules
// (network_hosts), each its own question, so that an approval rule or a
// user's yes for the one never grants the other. An approval covers this
// one run, and any failure to get one is a refusal (nothing runs). It
// returns the per-call policy to ask the executor for, or the refusal.
func (p *Tool) escalate(ctx context.Context, a runArgs) (*shell.SandboxPolicy, *toolsv1.CallResult) {
	policy, refused := p.escalateMode(ctx, a)
	if refused != nil {
		return nil, refused
	}
	hosts, refused := p.escalateNetwork(ctx, a, policy.GetMode())
	if refused != nil {
		return nil, refused
	}
	if len(hosts) > 0 {
		if policy == nil {
			policy = &shell.SandboxPolicy{}
		}
		policy.NetworkAllow = hosts
	}
	return policy, nil
}

// escalateMode asks for the mode sandbox_permissions names.
func (p *Tool) escalateMode(ctx context.Context, a runArgs) (*shell.SandboxPolicy, *toolsv1.CallResult) {
	mode := p.sh.SandboxMode()
	if a.SandboxPermissions == "" || a.SandboxPermissions == string(mode) {
		return nil, nil
	}
	if !slices.Contains(escalationTargets(mode), a.SandboxPermissions) {
		return nil, errorResult("sandbox_permissions %s gives no more access than the sandbox's %q mode; nothing was run", a.SandboxPermissions, mode)
	}
	if strings.TrimSpace(a.Justification) == "" {
		return nil, errorResult("sandbox escalation to %s needs a justification: say why the command needs more access; nothing was run", a.SandboxPermissions)
	}
	d := approval.Ask(ctx, p.approver, &approval.Request{
		Kind: approval.KindSandboxEscalation, Tool: p.def.Tool, Command: a.Command,
		TargetMode: a.SandboxPermissions, Reason: a.Justification,
	})
	// ctx.approval logs the decision.
	if !d.Approved {
		return nil, errorResult("sandbox escalation to %s was %s; nothing was run", a.SandboxPermissions, d.Reason)
	}
	return &shell.SandboxPolicy{Mode: a.SandboxPermissions}, nil
}

// escalateNetwork asks for the hosts network_hosts names, unless the run
// gets the whole network anyway (the sandbox's, or danger-full-access as
// target, the mode approved for it). It returns the hosts approved.
func (p *Tool) escalateNetwork(ctx context.Context, a runArgs, target string) ([]string, *toolsv1.CallResult) {
	mode := p.sh.SandboxMode()
	if len(a.NetworkHosts) == 0 || mode == "" || mode == shell.DangerFullAccess || target == string(shell.DangerFullAccess) || p.network {
		return nil, nil
	}
	var hosts []string
	for _, h := range a.NetworkHosts {
		h = strings.TrimSpace(h)
		if err := sandbox.CheckHost(h, false); err != nil {
			return nil, errorResult("network_hosts: %v; nothing was run", err)
		}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	named := strings.Join(hosts, ", ")
	if strings.TrimSpace(a.Justification) == "" {
		return nil, errorResult("network access to %s needs a justification: say why the command needs to reach it; nothing was run", named)
	}
	d := approval.Ask(ctx, p.approver, &approval.Request{
		Kind: approval.KindNetworkEscalation, Tool: p.def.Tool, Command: a.Command,
		Hosts: hosts, Reason: a.Justification,
	})
	// ctx.approval logs the decision.
	if !d.Approved {
		return nil, errorResult("network access to %s was %s; nothing was run", named, d.Reason)
	}
	return hosts, nil
}

// failure is what the model reads of a call that failed: the words of the
// side that refused or failed (a missing workdir, an executor that is
// restarting or gone), without the transport's or the client's wrapping.
func failure(err error) string {
	var e *sdk.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "aborted before the command finished"
	case errors.Is(err, context.DeadlineExceeded):
		return "the call ran out of time before the command finished"
	case errors.As(err, &e):
		return e.Msg
	}
	return err.Error()
}
