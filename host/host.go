// Package host is the dsh process: it loads a composition, starts each
// plugin as its own process, mirrors what they provide in the registry,
// connects consumers to providers through itself (with the capability
// check), and tears everything down in dependency order.
//
// A Host owns every plugin process it started and the runtime directory that
// holds their sockets. It does not read composition files (package
// composition does) and does not speak to agents (the front ends do).
//
// Only the runtime directory's checks are OS-specific (runtime_*.go): on
// Windows its owner is not checked (no uid) and a host is alive while its
// process has no exit code. Processes are package subprocess's and
// pluginproc's concern.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/confine"
	"github.com/dshrun/dsh/host/consent"
	"github.com/dshrun/dsh/host/credential"
	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/host/hub"
	"github.com/dshrun/dsh/host/jobtable"
	"github.com/dshrun/dsh/host/plan"
	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/registry"
)

// Options configures a Host. The zero value works: plugins are looked up in
// no directory (entries must use path), logs are discarded.
type Options struct {
	// PluginPath lists the directories searched for dsh-<name> binaries, in
	// order.
	PluginPath []string
	Logger     hclog.Logger
	// PluginLogger receives each plugin's log lines and go-plugin's own
	// messages about it; nil means Logger.
	PluginLogger hclog.Logger
	// RuntimeBase is the directory under which each host makes its runtime
	// directory; "" means $XDG_RUNTIME_DIR/dsh or <tmp>/dsh-<uid>.
	RuntimeBase string
	// TempBase is the directory under which each host makes the private
	// temporary folders of the owners of sandboxed commands; "" means
	// <tmp>/dsh-<uid>-tmp.
	TempBase string
	// SpillDir, if set, holds spill files instead of the runtime directory,
	// and they are left in place when the host stops (dsh call prints
	// their paths).
	SpillDir string
	// LookupEnv reads the host's environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Observe, if set, sees every registry transition in order.
	Observe func(registry.Event)
	// LogRing, if set, is the ring Logger and PluginLogger also write to
	// (hostlog.Ring's Host and Plugins); the host hands it on (LogRing) for
	// the console to read.
	LogRing *hostlog.Ring
	// WatchdogExe, if set, is the watchdog binary (dsh_watchdog, or dsh
	// itself): it is started as a watchdog that kills every command tree if
	// the host is killed.
	WatchdogExe string
}

// Host is a loaded composition.
type Host struct {
	opts  Options
	log   hclog.Logger
	comp  *composition.Composition
	rt    *runtimeDir
	reg   *registry.Registry
	sub   *procs.Manager        // ctx.subprocess
	jobs  *jobtable.Manager     // ctx.jobs
	terms *termsessions.Manager // ctx.terminals
	// handleOwners are the owners whose job and terminal ids are
	// unguessable handles (UseHandles).
	handleOwners sync.Map
	tools        *toolRegistry    // ctx.tools
	sandbox      *confine.Service // ctx.sandboxPolicy
	runner       *confine.Runner  // ctx.sandbox
	temps        *confine.Temps   // owners' temporary folders in the sandbox; nil for none
	approval     *consent.Policy  // ctx.approval
	core         *registry.Scope  // the host's own scope, which provides the core keys
	calls        calls            // the tool calls in flight and whom they serve
	flights      flights          // the same calls, for a stop on a signal (shutdown.go)
	entries      []*entry         // in composition order
	// changeMu serializes changes of the running composition (reloads,
	// applied edits), which read and then change entries.
	changeMu sync.Mutex
	mu       sync.Mutex
	byID     map[string]*entry // enabled entries; guarded by mu once started
	// serviceKeys maps a gRPC service name to the key it implements, for
	// callers that do not name the key (indexServices).
	serviceKeys atomic.Pointer[map[string]string]
	// binaries are the entries' plugin binaries, kept read-only in
	// confinements (indexServices).
	binaries atomic.Pointer[[]string]
	// callBound is callTimeout, in nanoseconds (boundCalls under boundMu).
	callBound atomic.Int64
	boundMu   sync.Mutex
	// applied is the composition the running set was last planned from
	// (the host section is comp's: it is read at start only); changeMu.
	applied *composition.Composition

	stampMu   sync.Mutex
	compStamp fileStamp            // the composition file as last applied; stampMu
	binStamps map[string]fileStamp // each binary as started

	console consoleState // what the console reads (console_*.go)

	closing atomic.Bool
	// consoleLogin makes a fresh console login URL for `dsh console`; nil
	// when the host serves no console (control.go).
	consoleLogin atomic.Pointer[func() string]
	// bg counts the restarts and swaps under way; Close waits for them.
	bg        sync.WaitGroup
	bgMu      sync.Mutex
	bgClosed  bool
	closeOnce sync.Once
	closeErr  error
}

// endpoint is the registry's value for a key provided by a plugin. Calls
// find the provider's current process in its slot.
type endpoint struct {
	id       string // provider's entry id
	slot     *slot
	services map[string]bool
	facts    map[string]string
	// kinds are the method kinds the provider's description gave.
	kinds hub.Kinds
}

func (e *endpoint) serviceList() []string {
	out := make([]string, 0, len(e.services))
	for s := range e.services {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Start plans the composition (starting every plugin to read its
// description, and checking the whole against them), then applies the plan
// in dependency order, in parallel where the graph allows. On any failure
// everything started is stopped and the error is a *LoadError listing every
// problem.
func Start(ctx context.Context, comp *composition.Composition, opts Options) (*Host, error) {
	h, err := newHost(comp, opts)
	if err != nil {
		return nil, err
	}
	h.compStamp = stamp(comp.File)
	p, started, err := h.planStart(ctx, comp)
	if err != nil {
		h.abort()
		return nil, err
	}
	h.reg = registry.New(registry.Options{Observe: h.observe})
	if err := h.addCore(); err != nil {
		h.stopAll(started)
		h.abort()
		return nil, err
	}
	if err := h.applyPlan(ctx, p, started); err != nil {
		h.abort()
		return nil, err
	}
	h.binStamps = map[string]fileStamp{}
	for _, en := range h.entryList() {
		if bin := en.bin(); bin != "" {
			h.binStamps[en.id] = stamp(bin)
		}
	}
	return h, nil
}

// planStart describes every entry of comp (disabled ones too, so errors
// can say what they would provide) and plans it from nothing.
func (h *Host) planStart(ctx context.Context, comp *composition.Composition) (*plan.Plan, map[string]*pluginproc.Process, error) {
	described, started := h.describe(ctx, comp, func(composition.Entry, string) bool { return true })
	p, err := h.makePlan(comp, described, started)
	return p, started, err
}

// Validate starts every plugin only to read its description, checks the
// whole composition against them as Start would, has each plugin check its
// effective config as its Apply would read it (the files it names), and
// stops them again. The problems are those Start would meet, in its words.
func Validate(ctx context.Context, comp *composition.Composition, opts Options) ([]Described, error) {
	h, err := newHost(comp, opts)
	if err != nil {
		return nil, err
	}
	defer h.abort()
	p, started, err := h.planStart(ctx, comp)
	if err != nil {
		return nil, err
	}
	errs := h.check(ctx, p, started)
	h.stopAll(started)
	if len(errs) > 0 {
		return nil, &LoadError{File: comp.File, Errs: errs}
	}
	steps := map[string]plan.Step{}
	for _, st := range p.Steps {
		steps[st.ID] = st
	}
	var out []Described
	for _, e := range comp.Plugins {
		if e.Disabled {
			out = append(out, Described{ID: e.ID, Disabled: true})
			continue
		}
		st := steps[e.ID]
		out = append(out, Described{ID: e.ID, Binary: st.Binary, Description: st.Desc})
	}
	return out, nil
}

// Described is one entry as validate saw it.
type Described struct {
	ID          string
	Binary      string
	Disabled    bool
	Description *lifecycle.Description
}

func newHost(comp *composition.Composition, opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.PluginLogger == nil {
		opts.PluginLogger = opts.Logger
	}
	rt, err := newRuntimeDir(opts.RuntimeBase)
	if err != nil {
		return nil, err
	}
	spill, keep := filepath.Join(rt.dir, "spill"), false
	if opts.SpillDir != "" {
		spill, keep = opts.SpillDir, true
	}
	// The host's environment is scrubbed once, here, for everything it
	// passes on: commands (the manager's ambient environment) and plugins
	// (PluginEnv reads through opts.LookupEnv).
	scrub := credential.NewRule(comp.Host.Scrub.Extra, comp.Host.Scrub.Keep)
	compLookup := opts.LookupEnv // what the composition is interpolated with
	opts.LookupEnv = scrub.Lookup(opts.LookupEnv)
	sub, err := procs.New(procs.Config{
		SpillDir:         spill,
		KeepSpill:        keep,
		Logger:           opts.Logger.Named("subprocess"),
		Scrub:            scrub,
		MaxSpillTotal:    comp.Host.Spill.Total,
		MaxSpillPerOwner: comp.Host.Spill.PerOwner,
	})
	if err != nil {
		_ = rt.remove()
		return nil, err
	}
	if err := sub.StartWatchdog(opts.WatchdogExe); err != nil {
		opts.Logger.Warn("no watchdog: command trees may outlive a killed host", "error", err)
	}
	temps, err := confine.OpenTemps(opts.TempBase)
	if err != nil {
		opts.Logger.Warn("no private temporary folders: sandboxed commands see the host's /tmp, read-only", "error", err)
	}
	hide := []string{rt.base}
	if temps != nil {
		hide = append(hide, temps.Base())
	}
	h := &Host{
		opts:     opts,
		log:      opts.Logger,
		comp:     comp,
		rt:       rt,
		sub:      sub,
		tools:    newToolRegistry(),
		sandbox:  confine.New(comp.Sandbox),
		runner:   confine.NewRunner(runnerOf(comp.Sandbox), confine.Options{Hide: hide}),
		temps:    temps,
		approval: consent.NewPolicy(comp.Approval, opts.Logger.Named("approval")),
		byID:     map[string]*entry{},
		applied:  comp,
	}
	h.console.lookup = compLookup
	h.runner.OnNetwork(h.logNetwork)
	h.tools.KeepWhileDown(h.wantsTool)
	h.jobs = jobtable.New(jobtable.Config{Open: h.openJobProcess, Logger: opts.Logger.Named("jobs"), Handles: h.usesHandles})
	h.terms = termsessions.New(termsessions.Config{Sub: sub, Logger: opts.Logger.Named("terminals"), SandboxSettle: h.settleTerminal, Handles: h.usesHandles})
	h.indexServices()
	h.boundCalls()
	return h, nil
}

// stateWords say what a scope entering each state is doing.
var stateWords = map[registry.State]string{
	registry.Pending:   "waiting for what it needs",
	registry.Loading:   "loading",
	registry.Active:    "ready",
	registry.Failed:    "failed",
	registry.Unloading: "stopping",
	registry.Disposed:  "stopped",
}

func (h *Host) observe(ev registry.Event) {
	h.log.Debug("plugin "+stateWords[ev.To], "entry", ev.Scope, "from", ev.From.String(), "reason", ev.Reason)
	h.observeFailed(ev)
	h.changed()
	if h.opts.Observe != nil {
		h.opts.Observe(ev)
	}
}

// endpoint returns the current provider of key.
func (h *Host) endpoint(key string) (*endpoint, bool) {
	if h.reg == nil {
		return nil, false
	}
	v, _, ok := h.reg.Lookup(key)
	if !ok {
		return nil, false
	}
	ep, ok := v.(*endpoint)
	return ep, ok
}

func (h *Host) keyOfService(service string) string {
	if m := h.serviceKeys.Load(); m != nil {
		return (*m)[service]
	}
	return ""
}

// Conn returns a connection on which the host itself calls the current
// provider of key.
func (h *Host) Conn(key string) grpc.ClientConnInterface {
	return &hub.Conn{Router: routes{h}, Key: key, Owner: hub.HostOwner}
}

// Registry exposes the registry, read-only use intended (status, watches).
func (h *Host) Registry() *registry.Registry { return h.reg }

// RuntimeDir is this host's private directory (mode 0700), removed when it
// stops.
func (h *Host) RuntimeDir() string { return h.rt.dir }

// Composition is the composition this host runs.
func (h *Host) Composition() *composition.Composition { return h.comp }

// Close tears the composition down: dependents before their providers,
// one at a time, each plugin stop bounded by the composition's stop timeout;
// then the runtime directory is removed. It is idempotent.
func (h *Host) Close(ctx context.Context) error {
	h.closing.Store(true)
	h.bgMu.Lock()
	h.bgClosed = true
	h.bgMu.Unlock()
	h.closeOnce.Do(func() {
		var errs []error
		if h.reg != nil {
			errs = append(errs, h.reg.Close(ctx))
		}
		h.bg.Wait()
		h.tools.Close()
		h.jobs.Close()
		errs = append(errs, h.terms.Close(ctx), h.sub.Close(ctx), h.runner.Close(), h.closeTemps())
		errs = append(errs, h.rt.remove())
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}

// abort stops everything after a failed start.
func (h *Host) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), h.stopTimeout()+5*time.Second)
	defer cancel()
	_ = h.Close(ctx)
}

// orDefault is d, or def when the composition left d out.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (h *Host) stopTimeout() time.Duration { return orDefault(h.comp.Host.StopTimeout, 5*time.Second) }
func (h *Host) startTimeout() time.Duration {
	return orDefault(h.comp.Host.StartTimeout, 10*time.Second)
}
func (h *Host) pingInterval() time.Duration { return orDefault(h.comp.Host.PingInterval, time.Second) }
func (h *Host) pingTimeout() time.Duration  { return orDefault(h.comp.Host.PingTimeout, 2*time.Second) }

// restartWait bounds how long a call waits for a restarting provider. By
// default it is as long as one restart may take by its own bounds: the
// longest backoff short of a crash loop, the start (startTimeout) and the
// apply (applyProcess's bound). A shorter wait would fail the call while
// the restart is still within its bounds, as it is on a loaded machine
// where a start takes seconds.
func (h *Host) restartWait() time.Duration {
	return orDefault(h.comp.Host.RestartWait, restartBound(h.startTimeout()))
}

// restartBound is how long one restart in place may take when starts are
// bounded by startTimeout.
func restartBound(startTimeout time.Duration) time.Duration {
	return backoffBase<<(crashLimit-2) + startTimeout + max(controlTimeout, startTimeout)
}

// callTimeout bounds every call the host forwards to a plugin: by default
// the longest a shell command may run plus 10s (callMargin). Every
// forwarded call reads it, so it is worked out only when the executors
// loaded change (boundCalls).
func (h *Host) callTimeout() time.Duration { return time.Duration(h.callBound.Load()) }

// boundCalls works callTimeout out again. The entries and their current
// loads call it after each change (a load made current or gone, a
// composition committed); one at a time, so the last value stored is
// from after the last change.
func (h *Host) boundCalls() {
	h.boundMu.Lock()
	defer h.boundMu.Unlock()
	d := h.comp.Host.CallTimeout
	if d <= 0 {
		d = h.executorsLongest(func(l *shell.Limits) int64 { return l.MaxTimeoutMs + l.GraceMs }) + callMargin
	}
	h.callBound.Store(int64(d))
}

// callMargin is what a call may take beyond its command: the hops, the
// rendering, a loaded machine.
const callMargin = 10 * time.Second

// executorsLongest is the largest of f's milliseconds among the limits
// the executors loaded said (loaded ones only: a process not yet applied
// has said nothing), or of ctx.shell's defaults when none is loaded. A
// reload or restart of an executor brings its new process's limits.
func (h *Host) executorsLongest(f func(*shell.Limits) int64) time.Duration {
	ms, found := int64(0), false
	for _, en := range h.entryList() {
		if ld := en.current(); ld != nil && ld.limits != nil {
			ms, found = max(ms, f(ld.limits)), true
		}
	}
	if !found {
		ms = f(shell.DefaultLimits())
	}
	return time.Duration(ms) * time.Millisecond
}

// first is a metadata key's first value.
func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// entryList is a copy of the entries (the watcher may add some).
func (h *Host) entryList() []*entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*entry(nil), h.entries...)
}

// Status describes every entry of the composition.
func (h *Host) Status() []EntryStatus {
	var out []EntryStatus
	for _, en := range h.entryList() {
		out = append(out, en.status())
	}
	return out
}

// status is en's line of `dsh status`.
func (en *entry) status() EntryStatus {
	e, bin, desc := en.view()
	st := EntryStatus{ID: e.ID, Name: e.Name, Binary: bin, Disabled: e.Disabled, State: "disabled"}
	if desc != nil {
		st.Name = desc.Name
		for _, p := range desc.Provides {
			st.Provides = append(st.Provides, p.Key)
		}
		st.Tools = en.toolNames()
	}
	if state, why := en.state(); state != "" {
		st.State, st.Reason = state, why
	}
	// While restarting there is no process to speak of yet.
	if ld := en.current(); ld != nil && st.State != "restarting" {
		st.Pid = ld.proc.Pid()
		st.Uptime = time.Since(ld.started)
		st.Version = ld.desc.Version
	}
	en.mu.Lock()
	st.Restarts = en.sup.restarts
	en.mu.Unlock()
	return st
}

// state is what `dsh status` says of en: its scope's state, or over an
// active one what its process is doing ("restarting", "unhealthy"); ""
// when it has no scope (disabled).
func (en *entry) state() (state, reason string) {
	s := en.getScope()
	if s == nil {
		return "", ""
	}
	state, reason = s.State().String(), s.Reason()
	if ld := en.current(); ld != nil && state == registry.Active.String() {
		// A crash restarts the process in place: the scope stays
		// active while its slot says what the process is doing.
		if st, why := ld.slot.status(); st != "" {
			state, reason = st, why
		}
	}
	return state, reason
}

// EntryStatus is one line of `dsh status`. As JSON (`dsh status --json`)
// its keys are camelCase, every key is always there, the uptime is
// uptimeMs (whole milliseconds) and empty lists are [].
type EntryStatus struct {
	ID, Name, Binary string
	Disabled         bool
	State, Reason    string
	Pid              int
	Restarts         int
	Uptime           time.Duration
	Version          string
	Provides, Tools  []string
}

// entryStatusJSON is EntryStatus on the wire, in the order shown.
type entryStatusJSON struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Binary   string   `json:"binary"`
	Disabled bool     `json:"disabled"`
	State    string   `json:"state"`
	Reason   string   `json:"reason"`
	Pid      int      `json:"pid"`
	Restarts int      `json:"restarts"`
	UptimeMs int64    `json:"uptimeMs"`
	Version  string   `json:"version"`
	Provides []string `json:"provides"`
	Tools    []string `json:"tools"`
}

func (s EntryStatus) MarshalJSON() ([]byte, error) {
	orEmpty := func(v []string) []string {
		if v == nil {
			return []string{}
		}
		return v
	}
	return json.Marshal(entryStatusJSON{
		ID: s.ID, Name: s.Name, Binary: s.Binary, Disabled: s.Disabled,
		State: s.State, Reason: s.Reason, Pid: s.Pid, Restarts: s.Restarts,
		UptimeMs: s.Uptime.Milliseconds(), Version: s.Version,
		Provides: orEmpty(s.Provides), Tools: orEmpty(s.Tools),
	})
}

func (s *EntryStatus) UnmarshalJSON(b []byte) error {
	var j entryStatusJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = EntryStatus{
		ID: j.ID, Name: j.Name, Binary: j.Binary, Disabled: j.Disabled,
		State: j.State, Reason: j.Reason, Pid: j.Pid, Restarts: j.Restarts,
		Uptime: time.Duration(j.UptimeMs) * time.Millisecond, Version: j.Version,
		Provides: j.Provides, Tools: j.Tools,
	}
	return nil
}

// LoadError lists every problem found while loading a composition.
type LoadError struct {
	File string
	Errs []error
}

// Problems are the problems listed, one by one: an error that joins
// several counts as each of them.
func (e *LoadError) Problems() []error {
	var out []error
	for _, err := range e.Errs {
		out = append(out, plan.Flatten(err)...)
	}
	return out
}

// Error is the one problem, or "FILE: N problems:" and the N problems, one
// indented entry each; a problem's further lines are indented beyond its
// first, so that each entry reads as one.
func (e *LoadError) Error() string {
	errs := e.Problems()
	if len(errs) == 1 {
		return indentRest(errs[0].Error(), "  ")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", composition.Pos{File: e.File}, len(errs))
	for _, err := range errs {
		b.WriteString("\n  " + indentRest(err.Error(), "    "))
	}
	return b.String()
}

// indentRest indents every line of s but the first.
func indentRest(s, indent string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+indent)
}

func (e *LoadError) Unwrap() []error { return e.Errs }

// EntryError is a problem with one entry, at its place in the composition.
type EntryError = plan.Error
