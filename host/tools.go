package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/host/consent"
	"github.com/dshrun/dsh/host/jobtable"
	"github.com/dshrun/dsh/host/toolset"
	"github.com/dshrun/dsh/sdk"
	"github.com/dshrun/dsh/sdk/modeltext"
)

// ctx.tools is the registry of host/toolset; what it needs of the host
// is here: each plugin as its Caller, each slot as its Slot.

// toolRegistry is the host's ctx.tools.
type toolRegistry = toolset.Registry[toolSlot]

func newToolRegistry() *toolRegistry { return toolset.New[toolSlot]() }

// toolSlot is a slot as the tool registry sees it.
type toolSlot struct{ *slot }

func (s toolSlot) Live() bool { return s.live() }

// toolCaller is a plugin as the tool registry sees it.
type toolCaller struct{ c caller }

func (t toolCaller) ID() string    { return t.c.callerID() }
func (t toolCaller) Label() string { return t.c.callerLabel() }

func (t toolCaller) Serving() (toolSlot, []string, bool) {
	ld := t.c.self()
	if ld == nil {
		return toolSlot{}, nil, false
	}
	// The tools of this load's config: a reload that renames one makes a
	// new load, and the old name goes with the old one.
	return toolSlot{ld.slot}, ld.target.tools, true
}

func (t toolCaller) AddEffect(label string, dispose func(context.Context) error) error {
	return t.c.addEffect(label, dispose)
}

// ToolChanges subscribes to changes of Tools (front ends send
// tools/list_changed): after a change the channel holds one value until
// it is received, however many changes came meanwhile, and it is closed
// by stop or when the host closes.
func (h *Host) ToolChanges() (changes <-chan struct{}, stop func()) { return h.tools.Changes() }

// ToolInfo describes a registered tool.
type ToolInfo struct {
	Name, Title, Description string
	InputSchema              json.RawMessage
	Plugin                   string // entry id of the plugin serving it
}

// Tools lists the registered tools, sorted by name.
func (h *Host) Tools() []ToolInfo {
	list := h.tools.List()
	out := make([]ToolInfo, 0, len(list))
	for _, t := range list {
		out = append(out, ToolInfo{
			Name:        t.Spec.Name,
			Title:       t.Spec.Title,
			Description: t.Spec.Description,
			InputSchema: json.RawMessage(t.Spec.InputSchema),
			Plugin:      t.Plugin,
		})
	}
	return out
}

// ToolCall is one call of a tool, and what its front end offers it.
type ToolCall struct {
	// Owner is the agent the call serves: its jobs, processes and spill
	// files are the owner's.
	Owner     string
	Tool      string
	Arguments json.RawMessage
	// Asker asks the call's user when ctx.approval's policy says ask; nil:
	// nobody can, and such a question is a denial that says so.
	Asker consent.Asker
	// Progress reports the running call's latest output line; without a
	// Report, nothing is reported.
	Progress Progress
	// Notify takes the messages for the call's user (interceptors' system
	// messages); nil: they are logged.
	Notify Notify
}

// ToolResult is what a tool call returns.
type ToolResult struct {
	// Text is the model-facing text, as the tool words it.
	Text string
	// Structured holds the facts as a JSON object (may be empty).
	Structured json.RawMessage
	IsError    bool
	// Resources are the caller's files the result refers to.
	Resources []Resource
	// Feedback are texts of the call's interceptors for the model, each its
	// own item after Text (so Text still ends with the tool's exit line).
	Feedback []string
}

// Resource is a file of the caller's that a tool result refers to (a spill
// file).
type Resource struct {
	Path, Title string
	// Complete is whether the file holds the whole stream.
	Complete bool
}

// ArgumentsError means the arguments do not fit the tool's schema (or the
// tool does not exist): the caller's mistake, not the tool's.
type ArgumentsError struct {
	Tool string
	Msg  string
}

func (e *ArgumentsError) Error() string { return fmt.Sprintf("tool %q: %s", e.Tool, e.Msg) }

// CallError is a call its tool did not answer: the plugin failed, went
// away or ran out of time, or the call ended before the tool was reached.
// Kind is the failure's kind in the sdk vocabulary (sdk.ErrProviderGone,
// sdk.ErrDeadline...), or the call's context error; errors.Is matches it.
// Msg says what went wrong in words a model may read.
type CallError struct {
	Tool string
	Kind error
	Msg  string
}

func (e *CallError) Error() string        { return fmt.Sprintf("tool %q: %s", e.Tool, e.Msg) }
func (e *CallError) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// toolFailed is err, a tool plugin's failure to answer (a status), as a
// CallError: its kind and its message, without the status's words.
func toolFailed(tool string, err error) *CallError {
	err = sdk.FromRPC(err)
	var e *sdk.Error
	if errors.As(err, &e) {
		return &CallError{Tool: tool, Kind: e.Kind, Msg: e.Msg}
	}
	return &CallError{Tool: tool, Msg: err.Error()}
}

// callInFlight is CallTool before its result's texts are cleaned: the
// call is tracked while it runs, so that a stopping host can stop it.
func (h *Host) callInFlight(ctx context.Context, call *ToolCall) (*ToolResult, error) {
	ctx, f, ok := h.flights.add(ctx)
	if !ok {
		return refused(), nil
	}
	defer h.flights.done(f)
	began := time.Now()
	res, err := h.callTool(ctx, f, call)
	if _, stopped := f.state(); stopped {
		h.log.Info("call stopped: the host is stopping", "tool", call.Tool, "owner", call.Owner, "command", commandIn(call.Arguments), "after", time.Since(began).Round(time.Millisecond))
		return stoppedAnswer(res), nil
	}
	h.logCall(ctx, call, began, res, err)
	return res, err
}

// logCall logs the end of a call: at info when it was cancelled (the
// tool may not say so), at debug otherwise.
func (h *Host) logCall(ctx context.Context, call *ToolCall, began time.Time, res *ToolResult, err error) {
	took := time.Since(began).Round(time.Millisecond)
	name, owner := call.Tool, call.Owner
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		h.log.Info("call cancelled", "tool", name, "owner", owner, "command", commandIn(call.Arguments), "after", took)
	case err != nil:
		h.log.Debug("call failed", "tool", name, "owner", owner, "error", err, "duration", took)
	default:
		h.log.Debug("call finished", "tool", name, "owner", owner, "is_error", res.IsError, "duration", took)
	}
}

// commandIn is the command a call's arguments carry, if any.
func commandIn(args json.RawMessage) string {
	var a struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(args, &a)
	return a.Command
}

func (h *Host) callTool(ctx context.Context, f *flight, call *ToolCall) (*ToolResult, error) {
	name, owner, args := call.Tool, call.Owner, call.Arguments
	t, ok := h.tools.Get(name)
	if !ok {
		var names []string
		for _, ti := range h.Tools() {
			names = append(names, ti.Name)
		}
		return nil, &ArgumentsError{Tool: name, Msg: "no such tool (tools: " + strings.Join(names, ", ") + ")"}
	}
	if t.Down {
		return nil, h.unavailable(name, t.Plugin)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	vs, err := t.Schema.Validate(args)
	if err != nil {
		return nil, &ArgumentsError{Tool: name, Msg: "arguments: " + err.Error()}
	}
	if len(vs) > 0 {
		var msgs []string
		for _, v := range vs {
			msgs = append(msgs, v.Where("arguments")+": "+v.Message)
		}
		return nil, &ArgumentsError{Tool: name, Msg: strings.Join(msgs, "; ")}
	}
	// A little longer than the calls the tool makes through the host, so
	// theirs is the deadline that speaks.
	ctx, cancel := context.WithTimeout(ctx, h.callTimeout()+5*time.Second)
	defer cancel()
	// The owner travels as a call id only the host stamps (see calls.go);
	// the request's owner field is for the tool's words and logs.
	callID, end := h.calls.beginAsking(owner, t.Plugin, call.Asker)
	defer end()
	f.setCall(callID, owner)
	icpt := h.before(ctx, call, callID, t, args)
	if icpt.refused != nil {
		icpt.refused.Feedback = icpt.feedback
		return icpt.refused, nil
	}
	args = icpt.args
	ld, err := t.Slot.get(ctx, t.Plugin, h.restartWait())
	if err != nil {
		if ctx.Err() != nil {
			return nil, &CallError{Tool: name, Kind: ctx.Err(), Msg: err.Error()}
		}
		return nil, h.unavailable(name, t.Plugin)
	}
	callCtx := ctx
	ctx = metadata.AppendToOutgoingContext(ctx, sdk.MetaCall, callID, sdk.MetaCaller, "host")
	// The owner's jobs this plugin registered that finished since its last
	// call go with the call, as facts the tool words.
	var finished []*jobsv1.Job
	notices := h.jobs.TakeNoticesFor(owner, t.Plugin)
	for _, snap := range notices {
		finished = append(finished, jobtable.JobProto(snap))
	}
	if call.Progress.Report != nil {
		stop := h.watchCall(callID, call.Progress)
		defer stop()
	}
	// Counted like relayed calls, so a reload or swap of the tool's plugin
	// lets the call finish before the old process stops.
	ld.inflight.begin()
	res, err := tools.NewHandlerClient(ld.proc.Conn()).Call(ctx, &tools.CallRequest{Name: name, Arguments: args, Owner: owner, FinishedJobs: finished})
	ld.inflight.end()
	if err != nil {
		// The tool never told them: the next call does.
		h.jobs.GiveBack(owner, t.Plugin, notices)
		failed := toolFailed(name, gone(ctx, ld, err))
		// Nor did its answer reach anyone: a job the call registered, or a
		// process it started and left running (a background start given
		// up on after the job began, a tool that crashed), has an id
		// nobody learned, and would run unseen until its owner ends. The
		// jobs are killed through their executors, whichever they are.
		// A host that is stopping kills everything anyway, and sooner.
		if _, stopping := f.state(); !stopping {
			kctx, stop := context.WithTimeout(context.WithoutCancel(callCtx), 10*time.Second)
			jobs := h.jobs.KillCall(kctx, owner, callID)
			stop()
			if n := h.sub.KillDetached(callID); n > 0 || jobs > 0 {
				h.log.Info("what a call that failed left running is stopped", "tool", name, "owner", owner, "jobs", jobs, "processes", n, "error", err)
			}
		}
		return nil, failed
	}
	out := &ToolResult{Text: res.Text, Structured: res.Structured, IsError: res.IsError, Feedback: icpt.feedback}
	dir := h.sub.OwnerDir(owner)
	for _, r := range res.Resources {
		// Only the owner's own spill files are offered, whatever a tool
		// names.
		if filepath.Dir(r.Path) == dir {
			out.Resources = append(out.Resources, Resource{Path: r.Path, Title: r.Title, Complete: r.Complete})
		}
	}
	h.after(callCtx, call, callID, t, args, out)
	return out, nil
}

// SpillDir is the folder of owner's spill files.
func (h *Host) SpillDir(owner string) string { return h.sub.OwnerDir(owner) }

// UseHandles makes owner's job and terminal ids unguessable handles
// (128 random bits) from now on, instead of short numbered ones: for an
// owner that is no connection of its own, such as the principal of
// clients on the stateless MCP protocol, whose ids are what ties one call
// to the next. ReleaseOwner ends it.
func (h *Host) UseHandles(owner string) { h.handleOwners.Store(owner, true) }

func (h *Host) usesHandles(owner string) bool {
	_, ok := h.handleOwners.Load(owner)
	return ok
}

// ReleaseOwner ends everything an agent owns: its jobs are killed and
// forgotten, its terminal sessions closed, its processes killed, its
// spill files and its temporary folder removed.
func (h *Host) ReleaseOwner(ctx context.Context, owner string) error {
	defer h.handleOwners.Delete(owner)
	h.jobs.ReleaseOwner(owner)
	err := h.terms.ReleaseOwner(ctx, owner)
	return errors.Join(err, h.sub.ReleaseOwner(ctx, owner), h.releaseTemp(owner))
}

// Progress asks a call to report its latest output line while it runs:
// the first report comes within a second of the start, then at most one a
// second when the line changed, and at least one every Keepalive (0: none)
// so clients that time out without progress keep waiting. Without it a
// call costs nothing more.
type Progress struct {
	Report    func(line string) // the line cleaned and bounded; "" before any output
	Keepalive time.Duration
}

// progressLine bounds what one progress report shows of a line.
const progressLine = 200

// watchCall reports call's latest output line until stop: a process's
// it started, or a command it runs in a terminal's shell.
func (h *Host) watchCall(call string, pr Progress) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTimer(500 * time.Millisecond)
		defer t.Stop()
		last, sent, lastAt := "", false, time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			raw := h.sub.LatestLine(call)
			if len(raw) == 0 {
				// A command run in a persistent shell for the call.
				raw = h.terms.LatestLine(call)
			}
			cleaned, _ := modeltext.Clean(raw)
			line := string(modeltext.Tail(cleaned, progressLine, false).Text)
			if !sent || line != last || (pr.Keepalive > 0 && time.Since(lastAt) >= pr.Keepalive) {
				pr.Report(line)
				last, sent, lastAt = line, true, time.Now()
			}
			t.Reset(time.Second)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
