package host

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	hjobs "github.com/dshrun/dsh/host/core/jobs"
	"github.com/dshrun/dsh/internal/schemacheck"
	"github.com/dshrun/dsh/sdk"
)

// ctx.tools: the model-facing tools plugins register. A registration is an
// effect of the registering plugin's scope, so a plugin's tools vanish with
// it; a name held by one plugin is refused to another with both named.

type tool struct {
	spec   *toolsv1.ToolSpec
	plugin string // entry id
	label  string
	schema *schemacheck.Schema
	// by is the process that registered it; calls go to whichever process
	// holds its slot by then (a restarted one registers its tools again).
	by *load
}

type toolRegistry struct {
	mu      sync.Mutex
	tools   map[string]*tool
	changed func()
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// add registers t. Another process of the same plugin entry takes the
// tool over: a later process of the same scope (a restart or a swap,
// renewed: the scope's effect that removes it is already there), or the
// new scope of a make-before-break reload. prev is what it replaced.
func (r *toolRegistry) add(t *tool) (prev *tool, renewed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.tools[t.spec.Name]; ok {
		if cur.plugin != t.plugin || t.by == nil || cur.by == nil {
			return nil, false, status.Errorf(codes.AlreadyExists, "tool %q is already registered by plugin %s; plugin %s cannot register it",
				t.spec.Name, cur.label, t.label)
		}
		r.tools[t.spec.Name] = t
		return cur, cur.by.slot == t.by.slot, nil
	}
	r.tools[t.spec.Name] = t
	return nil, false, nil
}

// drop removes the registration of name made by slot's scope, or gives
// the tool back to prev when prev's scope still serves. It reports whether
// the listing changed.
func (r *toolRegistry) drop(name string, slot *slot, prev *tool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.tools[name]
	if !ok || cur.by.slot != slot {
		return false
	}
	if prev != nil && prev.by.slot.live() {
		r.tools[name] = prev
		return !proto.Equal(prev.spec, cur.spec)
	}
	delete(r.tools, name)
	return true
}

// remove drops the tool name if keep says it is the registration to drop.
func (r *toolRegistry) remove(name string, keep func(*tool) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.tools[name]; ok && keep(cur) {
		delete(r.tools, name)
		return true
	}
	return false
}

func (r *toolRegistry) get(name string) (*tool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tools[name]
	return t, ok
}

// toolsServer serves dsh.tools.v1.Tools to one plugin.
type toolsServer struct {
	toolsv1.UnimplementedToolsServer
	h *Host
	c caller
}

func (s *toolsServer) Register(_ context.Context, spec *toolsv1.ToolSpec) (*toolsv1.RegisterResponse, error) {
	if !toolName.MatchString(spec.Name) {
		return nil, status.Errorf(codes.InvalidArgument, "tool name %q: use 1 to 64 letters, digits, '_' or '-'", spec.Name)
	}
	sch, err := schemacheck.Compile([]byte(spec.InputSchema))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "tool %q: input %v", spec.Name, err)
	}
	by := s.c.self()
	if by == nil {
		return nil, status.Error(codes.FailedPrecondition, "this caller cannot serve tool calls")
	}
	if !slices.Contains(by.desc.Tools, spec.Name) {
		return nil, status.Errorf(codes.PermissionDenied, "plugin %s did not declare tool %q: add it to its description's Tools list (it declares %v)",
			s.c.callerLabel(), spec.Name, by.desc.Tools)
	}
	t := &tool{
		spec:   spec,
		plugin: s.c.callerID(),
		label:  s.c.callerLabel(),
		schema: sch,
		by:     by,
	}
	prev, renewed, err := s.h.tools.add(t)
	if err != nil {
		return nil, err
	}
	// Clients hear of a takeover only if what they list changed.
	changed := prev == nil || !proto.Equal(prev.spec, spec)
	if renewed {
		if changed {
			s.h.toolsChanged()
		}
		return &toolsv1.RegisterResponse{}, nil
	}
	// The registration is an effect of the caller's scope. When the scope
	// goes while the one it took the tool over from still serves (a
	// reload that failed), the tool goes back to that one.
	slot := by.slot
	drop := func() bool { return s.h.tools.drop(spec.Name, slot, prev) }
	if err := s.c.addEffect("tool "+spec.Name, func(context.Context) error {
		if drop() {
			s.h.toolsChanged()
		}
		return nil
	}); err != nil {
		drop()
		return nil, status.Errorf(codes.FailedPrecondition, "tool %q: %v", spec.Name, err)
	}
	if changed {
		s.h.toolsChanged()
	}
	return &toolsv1.RegisterResponse{}, nil
}

func (s *toolsServer) Unregister(_ context.Context, req *toolsv1.UnregisterRequest) (*toolsv1.UnregisterResponse, error) {
	by := s.c.self()
	if by == nil || !s.h.tools.remove(req.Name, func(cur *tool) bool { return cur.by.slot == by.slot }) {
		return nil, status.Errorf(codes.NotFound, "tool %q is not registered by plugin %s", req.Name, s.c.callerLabel())
	}
	s.h.toolsChanged()
	return &toolsv1.UnregisterResponse{}, nil
}

func (h *Host) toolsChanged() {
	if h.opts.ToolsChanged != nil {
		h.opts.ToolsChanged()
	}
}

// ToolInfo describes a registered tool.
type ToolInfo struct {
	Name, Title, Description string
	InputSchema              json.RawMessage
	Plugin                   string // entry id of the plugin serving it
}

// Tools lists the registered tools, sorted by name.
func (h *Host) Tools() []ToolInfo {
	h.tools.mu.Lock()
	defer h.tools.mu.Unlock()
	out := make([]ToolInfo, 0, len(h.tools.tools))
	for _, t := range h.tools.tools {
		out = append(out, ToolInfo{
			Name:        t.spec.Name,
			Title:       t.spec.Title,
			Description: t.spec.Description,
			InputSchema: json.RawMessage(t.spec.InputSchema),
			Plugin:      t.plugin,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
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

// CallTool calls a tool for owner (the agent). It fails with an
// *ArgumentsError for an unknown tool or arguments that do not fit its
// schema, and with another error when the tool itself failed to answer.
func (h *Host) CallTool(ctx context.Context, owner, name string, args json.RawMessage) (*ToolResult, error) {
	t, ok := h.tools.get(name)
	if !ok {
		var names []string
		for _, ti := range h.Tools() {
			names = append(names, ti.Name)
		}
		return nil, &ArgumentsError{Tool: name, Msg: "no such tool (tools: " + strings.Join(names, ", ") + ")"}
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	vs, err := t.schema.Validate(args)
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
	ld, err := t.by.slot.get(ctx, t.plugin, h.restartWait())
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", name, err)
	}
	// The owner travels as a call id only the host stamps (see calls.go);
	// the request's owner field is for the tool's words and logs.
	callID, end := h.calls.begin(owner, t.plugin)
	defer end()
	ctx = metadata.AppendToOutgoingContext(ctx, sdk.MetaCall, callID, sdk.MetaCaller, "host")
	// Counted like relayed calls, so a reload or swap of the tool's plugin
	// lets the call finish before the old process stops.
	// The owner's jobs this plugin registered that finished since its last
	// call go with the call, as facts the tool words.
	var finished []*jobsv1.Job
	for _, snap := range h.jobs.TakeNoticesFor(owner, t.plugin) {
		finished = append(finished, hjobs.JobProto(snap))
	}
	ld.inflight.begin()
	res, err := toolsv1.NewToolHandlerClient(ld.proc.Conn()).Call(ctx, &toolsv1.CallRequest{Name: name, Arguments: args, Owner: owner, FinishedJobs: finished})
	ld.inflight.end()
	if err != nil {
		err = gone(ctx, ld, err)
		return nil, fmt.Errorf("tool %q: %s", name, status.Convert(err).Message())
	}
	out := &ToolResult{Text: res.Text, Structured: res.Structured, IsError: res.IsError}
	dir := h.sub.OwnerDir(owner)
	for _, r := range res.Resources {
		// Only the owner's own spill files are offered, whatever a tool
		// names.
		if filepath.Dir(r.Path) == dir {
			out.Resources = append(out.Resources, Resource{Path: r.Path, Title: r.Title, Complete: r.Complete})
		}
	}
	return out, nil
}

// SpillDir is the folder of owner's spill files.
func (h *Host) SpillDir(owner string) string { return h.sub.OwnerDir(owner) }

// ReleaseOwner ends everything an agent owns: its jobs are killed and
// forgotten, its processes killed and its spill files removed.
func (h *Host) ReleaseOwner(ctx context.Context, owner string) error {
	h.jobs.ReleaseOwner(owner)
	return h.sub.ReleaseOwner(ctx, owner)
}
