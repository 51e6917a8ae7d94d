package host

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/hub"
	"github.com/dshrun/dsh/host/plan"
	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/registry"
)

// Start, hot reload and `dsh reload` change the running set the same way:
// describe what is new, make a plan (host/plan: every check, nothing
// started for real), then apply it as one transaction in two phases.
//
// prepare: each entry the plan adds, reloads or moves gets a new registry
// scope on its new process. The scopes apply (the plugins' Apply, their
// tools, the keys nobody holds) while everything that runs keeps serving;
// a key a running scope holds is staged, not taken. If a new scope does
// not become active, every new scope is disposed, every process not used
// is stopped, and the entries are as they were.
//
// commit: the staged keys are taken over (make-before-break: dependents
// keep running when the provider describes itself as before and keeps no
// caller state; otherwise they reload against the new one), the entries
// take their new scopes, and last what left is disposed: the scopes
// replaced, then the removed entries, dependents first. Nothing in commit
// can refuse; a disposal that fails is logged.

// describe resolves the binary of every entry of comp that want selects
// and starts one process of each, in parallel, to read its description.
// The processes are returned for the plan's steps to use; the caller stops
// those it does not use. A disabled entry is described only for errors to
// say what it would have provided, and stopped at once.
func (h *Host) describe(ctx context.Context, comp *composition.Composition, want func(e composition.Entry, bin string) bool) (map[string]plan.Described, map[string]*pluginproc.Process) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		out   = map[string]plan.Described{}
		procs = map[string]*pluginproc.Process{}
	)
	set := func(id string, d plan.Described) {
		mu.Lock()
		defer mu.Unlock()
		out[id] = d
	}
	for _, e := range comp.Plugins {
		bin, err := comp.Resolve(e, h.opts.PluginPath)
		if err != nil {
			if !e.Disabled {
				set(e.ID, plan.Described{Err: err})
			}
			continue
		}
		if !want(e, bin) {
			continue
		}
		wg.Go(func() {
			p, err := h.startProcess(ctx, e.ID, bin, e.SHA256)
			switch {
			case err != nil && e.Disabled:
			case err != nil:
				set(e.ID, plan.Described{Binary: bin, Err: &EntryError{Pos: e.Pos, ID: e.ID, Err: err}})
			case e.Disabled:
				set(e.ID, plan.Described{Binary: bin, Desc: p.Description()})
				h.stopProcess(p) // outside the lock: a stop may take its timeout
			default:
				set(e.ID, plan.Described{Binary: bin, Desc: p.Description()})
				mu.Lock()
				procs[e.ID] = p
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out, procs
}

// running is the running set, for the planner.
func (h *Host) running() []plan.Running {
	var out []plan.Running
	for _, en := range h.entryList() {
		e, bin, desc := en.view()
		if e.Disabled || desc == nil {
			continue
		}
		out = append(out, plan.Running{Entry: e, Binary: bin, Desc: desc, Config: en.configJSON(), Tools: en.toolNames()})
	}
	return out
}

// makePlan plans comp against the running set; on a problem it stops the
// processes described for it and returns a *LoadError.
func (h *Host) makePlan(comp *composition.Composition, described map[string]plan.Described, procs map[string]*pluginproc.Process) (*plan.Plan, error) {
	p, errs := plan.Make(plan.Input{Comp: comp, Described: described, Running: h.running(), Core: isCore})
	if len(errs) > 0 {
		h.stopAll(procs)
		return nil, &LoadError{File: comp.File, Errs: errs}
	}
	return p, nil
}

// check asks each process described for p what its Apply would refuse of
// its step's config, all at once, each within the bound of an Apply; the
// problems come in the file's order, at their entries, as Start's would.
func (h *Host) check(ctx context.Context, p *plan.Plan, procs map[string]*pluginproc.Process) []error {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, st := range p.Steps {
		proc := procs[st.ID]
		if proc == nil {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, max(controlTimeout, h.startTimeout()))
			defer cancel()
			if err := proc.Check(cctx, &lifecycle.CheckRequest{Id: st.ID, ConfigJson: st.Config}); err != nil {
				mu.Lock()
				errs = append(errs, &EntryError{Pos: st.Entry.Pos, ID: st.ID, Err: err})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	plan.SortByLine(errs)
	return errs
}

func (h *Host) stopAll(procs map[string]*pluginproc.Process) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { h.stopProcess(p) })
	}
	wg.Wait()
}

// change is one step of a plan being applied.
type change struct {
	st       plan.Step
	en       *entry
	first    *spare
	scope    *registry.Scope // the new scope
	oldScope *registry.Scope
	staging  *staging
}

// spare is a process started for describing, handed to the first Apply of
// the scope it was started for.
type spare struct {
	mu sync.Mutex
	p  *pluginproc.Process
}

func (s *spare) take() *pluginproc.Process {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.p
	s.p = nil
	return p
}

// staging holds what a new scope of a prepared change will take over at
// commit: the keys a running scope held while it applied, and its load.
type staging struct {
	mu   sync.Mutex
	keys []stagedKey
	ld   *load
}

type stagedKey struct {
	key string
	ep  *endpoint
}

func (s *staging) reset(ld *load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys, s.ld = nil, ld
}

func (s *staging) add(key string, ep *endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, stagedKey{key, ep})
}

func (s *staging) get() ([]stagedKey, *load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys, s.ld
}

// applyPlan applies p: prepare, then commit. procs are the processes
// described for p's steps, by entry id. h.changeMu is held (or the host is
// starting).
func (h *Host) applyPlan(ctx context.Context, p *plan.Plan, procs map[string]*pluginproc.Process) error {
	var changes []*change
	var removes []*entry
	for _, st := range p.Steps {
		switch st.Action {
		case plan.Keep:
			continue
		case plan.Remove:
			removes = append(removes, h.find(st.ID))
			continue
		}
		c := &change{st: st, staging: &staging{}}
		if pr := procs[st.ID]; pr != nil {
			c.first = &spare{p: pr}
			delete(procs, st.ID)
		}
		if st.Action == plan.Add {
			c.en = &entry{h: h, id: st.ID, e: st.Entry, binary: st.Binary, desc: st.Desc, config: st.Config, tools: st.Tools}
		} else {
			c.en = h.find(st.ID)
			c.oldScope = c.en.getScope()
			c.en.resetCrashes()
		}
		changes = append(changes, c)
	}
	h.stopAll(procs) // described, but no step needs a new process of them
	if err := h.prepare(ctx, p, changes); err != nil {
		return err
	}
	h.commit(ctx, p, changes, removes)
	return nil
}

// prepare adds a scope for every change and waits until they settle; if
// one does not become active, it undoes them all.
func (h *Host) prepare(ctx context.Context, p *plan.Plan, changes []*change) error {
	var errs []error
	for _, c := range changes {
		en, st := c.en, c.st
		id := st.ID
		if c.oldScope != nil {
			en.mu.Lock()
			en.gen++
			id = fmt.Sprintf("%s#%d", st.ID, en.gen)
			en.mu.Unlock()
		}
		spec := applySpec{
			desc:    st.Desc,
			target:  procTarget{binary: st.Binary, sha256: st.Entry.SHA256, config: st.Config, tools: st.Tools},
			first:   c.first,
			staging: c.staging,
		}
		s, err := h.reg.Add(registry.Spec{ID: id, Label: en.label(), Inject: depsOf(st.Desc), Apply: h.applyEntryAs(en, spec)})
		if err != nil {
			errs = append(errs, &EntryError{Pos: st.Entry.Pos, ID: st.ID, Err: err})
			break
		}
		c.scope = s
	}
	if len(errs) == 0 {
		if err := h.reg.Settled(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: waiting for plugins to apply: %w", p.Comp.File, err))
		}
	}
	if len(errs) == 0 {
		for _, c := range changes {
			switch state := c.scope.State(); {
			case state == registry.Active:
			case state == registry.Pending && c.oldScope != nil && c.oldScope.State() != registry.Active:
				// It was not serving before either (waiting for its
				// injects): it starts the new way when they come.
			case state == registry.Pending:
				errs = append(errs, c.en.errorf("still pending: %s", c.scope.Reason()))
			default:
				errs = append(errs, c.en.errorf("%s", c.scope.Reason()))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	// Undo: the new scopes go, dependents first; the old ones never
	// stopped serving.
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		if c.scope != nil {
			if err := c.scope.Dispose(context.WithoutCancel(ctx)); err != nil {
				h.log.Warn("a refused change was not undone cleanly", "entry", c.st.ID, "error", err)
			}
		}
		if pr := c.first.take(); pr != nil {
			h.stopProcess(pr)
		}
	}
	err := &LoadError{File: p.Comp.File, Errs: errs}
	h.noteError(err)
	return err
}

// commit swaps the prepared scopes in and disposes what they replaced and
// what the plan removes.
func (h *Host) commit(ctx context.Context, p *plan.Plan, changes []*change, removes []*entry) {
	for _, c := range changes {
		keys, ld := c.staging.get()
		keep := c.st.Was != nil && proto.Equal(c.st.Was.Desc, c.st.Desc)
		for _, pr := range c.st.Desc.Provides {
			keep = keep && !pr.CallerState
		}
		for _, k := range keys {
			// A key another entry held (one the plan removes) moves with
			// its dependents reloading; the entry's own keeps them if it
			// can.
			deps := registry.ReloadDependents
			if _, owner, _ := h.reg.Lookup(k.key); keep && owner == c.oldScope {
				deps = registry.KeepDependents
			}
			if _, err := c.scope.Replace(k.key, k.ep, deps); err != nil {
				h.log.Error("a reloaded plugin could not take its key over", "entry", c.st.ID, "key", k.key, "error", err)
			}
		}
		h.clearLastError(c.st.ID) // loaded anew
		en := c.en
		en.mu.Lock()
		en.e, en.binary, en.config, en.desc, en.tools, en.scope = c.st.Entry, c.st.Binary, c.st.Config, c.st.Desc, c.st.Tools, c.scope
		if ld != nil {
			if cur := ld.slot.current(); cur != nil {
				ld = cur // restarted in place meanwhile
			}
			en.load = ld
		}
		en.mu.Unlock()
		if c.oldScope != nil {
			h.log.Info("plugin reloaded", "entry", c.st.ID, "binary", c.st.Binary, "consumers_kept", keep)
		}
	}
	for _, st := range p.Steps {
		if en := h.find(st.ID); st.Action == plan.Keep && en != nil {
			en.mu.Lock()
			en.e = st.Entry // the same, perhaps on another line
			en.mu.Unlock()
		}
	}
	h.mu.Lock()
	next := make([]*entry, 0, len(p.Comp.Plugins))
	h.byID = map[string]*entry{}
	byID := map[string]*entry{}
	for _, en := range h.entries {
		byID[en.id] = en
	}
	for _, c := range changes {
		byID[c.st.ID] = c.en
	}
	for _, e := range p.Comp.Plugins {
		en := byID[e.ID]
		if e.Disabled {
			en = &entry{h: h, id: e.ID, e: e}
		} else {
			h.byID[e.ID] = en
		}
		next = append(next, en)
	}
	h.entries = next
	h.mu.Unlock()
	h.applied = p.Comp
	h.clearRefused()
	h.indexServices()
	h.boundCalls()
	h.setSandbox(p.Comp.Sandbox)    // its injectors reload; the change settles below
	h.approval.Set(p.Comp.Approval) // read at each request: no reload needed

	for _, c := range changes {
		if c.oldScope != nil {
			if err := c.oldScope.Dispose(context.WithoutCancel(ctx)); err != nil {
				h.log.Warn("the replaced plugin did not stop cleanly", "entry", c.st.ID, "error", err)
			}
		}
	}
	for _, en := range removes {
		if s := en.getScope(); s != nil {
			if err := s.Dispose(context.WithoutCancel(ctx)); err != nil {
				h.log.Warn("a removed plugin did not stop cleanly", "entry", en.id, "error", err)
			}
		}
		en.mu.Lock()
		en.e.Disabled = true
		en.mu.Unlock()
		h.clearLastError(en.id)
	}
	// Tools kept listed while down go once their entry no longer declares
	// them (removed, disabled, or reloaded without them).
	h.tools.Prune()
	// A change is done once what it set off has settled: the dependents
	// that reload against a taken-over key are active again (or say why
	// not) when the caller hears back.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.startTimeout()+controlTimeout)
	defer cancel()
	if err := h.reg.Settled(sctx); err != nil {
		h.log.Warn("the change did not settle in time", "error", err)
	}
	h.changed()
}

// indexServices maps every gRPC service the composition serves to its key,
// for callers that do not name the key.
func (h *Host) indexServices() {
	m := map[string]string{}
	for key, services := range coreServices {
		for _, s := range services {
			m[s] = key
		}
	}
	var bins []string
	for _, en := range h.entryList() {
		if bin := en.bin(); bin != "" && !slices.Contains(bins, bin) {
			bins = append(bins, bin)
		}
		e, _, desc := en.view()
		if e.Disabled || desc == nil {
			continue
		}
		for _, p := range desc.Provides {
			for _, s := range p.GrpcServices {
				m[s] = p.Key
			}
		}
	}
	h.serviceKeys.Store(&m)
	h.binaries.Store(&bins)
}

// ApplyComposition moves the running host to next. Every check is made
// before anything changes, and applying is a transaction: an error leaves
// the host as it was (see the top of this file).
func (h *Host) ApplyComposition(ctx context.Context, next *composition.Composition) error {
	h.changeMu.Lock()
	defer h.changeMu.Unlock()
	return h.applyComposition(ctx, next)
}

// applyComposition is ApplyComposition with h.changeMu held.
func (h *Host) applyComposition(ctx context.Context, next *composition.Composition) error {
	p, procs, err := h.planComposition(ctx, next)
	if err != nil {
		h.noteError(err)
		return err
	}
	h.warnHostSection(next)
	return h.applyPlan(ctx, p, procs)
}

// warnHostSection says that an edit of the host section waits for a
// restart.
func (h *Host) warnHostSection(next *composition.Composition) {
	if !reflect.DeepEqual(next.Host, h.comp.Host) {
		// Timeouts, the pulse and the scrub are set up when the host
		// starts; applying them to a running host is not supported.
		h.log.Warn("the host section changed; it is read at start only: restart dsh to apply it", "file", next.File)
	}
	if !reflect.DeepEqual(clientsSettings(next.Clients), clientsSettings(h.comp.Clients)) {
		// The MCP front end reads it as it starts (dsh serve).
		h.log.Warn("the clients section changed; it is read at start only: restart dsh to apply it", "file", next.File)
	}
}

// clientsSettings is a clients section without the places it was read at.
func clientsSettings(c *composition.Clients) *composition.Clients {
	if c == nil {
		return nil
	}
	cp := *c
	cp.Pos = composition.Pos{}
	cp.Tokens = nil
	for _, t := range c.Tokens {
		cp.Tokens = append(cp.Tokens, composition.ClientToken{Name: t.Name, Token: t.Token})
	}
	return &cp
}

// planComposition describes what next runs anew (new entries, other
// binaries or pins) and plans next against the running set; h.changeMu
// is held. The processes are the plan's to use, or stopped on an error.
func (h *Host) planComposition(ctx context.Context, next *composition.Composition) (*plan.Plan, map[string]*pluginproc.Process, error) {
	runs := map[string]plan.Running{}
	for _, r := range h.running() {
		runs[r.Entry.ID] = r
	}
	described, procs := h.describe(ctx, next, func(e composition.Entry, bin string) bool {
		r, ok := runs[e.ID]
		return !e.Disabled && (!ok || r.Binary != bin || r.Entry.SHA256 != e.SHA256)
	})
	p, err := h.makePlan(next, described, procs)
	if err != nil {
		return nil, nil, err
	}
	return p, procs, nil
}

// ErrUnknownEntry is returned for an id the composition does not have.
var ErrUnknownEntry = errors.New("no such entry")

// Reload replaces one entry's process with a new one of its binary, as a
// plan of one step: described and checked first (the same keys; a config
// its schema accepts; no tool another entry has), then applied as a
// transaction. A provider is replaced make-before-break: the new process
// applies while the old one serves, then takes the keys over; calls in
// flight on the old one finish (within the drain bound) before it stops.
// If the new one fails, the old one keeps serving and the error says why.
// Reload also takes an entry out of a crash loop.
func (h *Host) Reload(ctx context.Context, id string) error {
	h.changeMu.Lock()
	defer h.changeMu.Unlock()
	h.mu.Lock()
	en, ok := h.byID[id]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("reload %q: %w", id, ErrUnknownEntry)
	}
	if en.getScope() == nil {
		return fmt.Errorf("reload %q: not loaded", id)
	}
	e, bin, _ := en.view()
	described := map[string]plan.Described{}
	procs := map[string]*pluginproc.Process{}
	if pr, err := h.startProcess(ctx, id, bin, e.SHA256); err != nil {
		described[id] = plan.Described{Binary: bin, Err: &EntryError{Pos: e.Pos, ID: id, Err: err}}
	} else {
		described[id] = plan.Described{Binary: bin, Desc: pr.Description()}
		procs[id] = pr
	}
	p, err := h.makePlan(h.applied, described, procs)
	if err != nil {
		h.noteError(err)
		return fmt.Errorf("reload %q: %w", id, err)
	}
	for i := range p.Steps {
		if st := &p.Steps[i]; st.ID == id && st.Action == plan.Keep {
			st.Action = plan.Reload
		}
	}
	if err := h.applyPlan(ctx, p, procs); err != nil {
		return fmt.Errorf("reload %q: %w", id, err)
	}
	return nil
}

func depsOf(d *lifecycle.Description) []registry.Dep {
	var out []registry.Dep
	for _, in := range d.Inject {
		out = append(out, registry.Dep{Key: in.Key, Optional: in.Optional})
	}
	return out
}

// applySpec is what a scope's Apply starts and provides.
type applySpec struct {
	desc   *lifecycle.Description
	target procTarget // the binary, its pin and the config every process of the scope starts from
	first  *spare     // the process described for the plan, used by the first Apply
	// staging receives the keys a running scope holds while this one
	// applies: a plan's commit takes them over.
	staging *staging
}

// applyEntryAs is the registry's Apply for a scope of en: take (or start)
// the process, serve the host to it, send Apply, then provide its keys.
func (h *Host) applyEntryAs(en *entry, spec applySpec) func(context.Context, *registry.Scope) error {
	return func(ctx context.Context, s *registry.Scope) error {
		if err := en.waitBackoff(ctx); err != nil {
			return err
		}
		proc := spec.first.take()
		if proc == nil {
			var err error
			if proc, err = h.startProcess(ctx, en.id, spec.target.binary, spec.target.sha256); err != nil {
				return err
			}
		}
		sl := newSlot(h.changed)
		var first *load // until the slot holds a process
		// First effect, so it is disposed last: the process outlives every
		// registration it made. It stops whichever process the slot holds
		// by then, and ends a restart under way.
		if _, err := s.Effect("process of "+en.id, func(ctx context.Context) error {
			ld := sl.close()
			if ld == nil {
				ld = first
			}
			if ld == nil {
				return proc.Stop(ctx)
			}
			ld.stopping.Store(true)
			en.clearCurrent(ld)
			ld.drain(ctx, h.drainTimeout())
			sctx, cancel := context.WithTimeout(ctx, h.stopTimeout())
			defer cancel()
			return ld.proc.Stop(sctx)
		}); err != nil {
			_ = proc.Stop(context.WithoutCancel(ctx))
			return err
		}
		// Processes the plugin owns (spawned without naming another owner)
		// go with it; disposed before the plugin process itself stops.
		if _, err := s.Effect("processes of "+en.id, func(ctx context.Context) error {
			return errors.Join(h.sub.ReleaseOwner(ctx, en.id), h.releaseTemp(en.id))
		}); err != nil {
			_ = proc.Stop(context.WithoutCancel(ctx))
			return err
		}
		ld, resp, err := h.applyProcess(ctx, en, s, sl, spec.desc, proc, spec.target)
		first = ld
		if err != nil {
			return h.crashedDuringApply(ld, ctx, err)
		}
		sl.set(ld)
		spec.staging.reset(ld)
		if cur := en.getScope(); cur == nil || cur == s {
			// A plan's new scope becomes current at its commit.
			en.setCurrent(ld)
		}
		for _, p := range spec.desc.Provides {
			ep := &endpoint{id: en.id, slot: sl, services: map[string]bool{}, kinds: hub.DescribedKinds(p)}
			for _, svc := range p.GrpcServices {
				ep.services[svc] = true
			}
			if f := resp.Facts[p.Key]; f != nil {
				ep.facts = f.Values
			}
			if _, owner, held := h.reg.Lookup(p.Key); held && owner != s {
				spec.staging.add(p.Key, ep)
				continue
			}
			if _, err := s.Provide(p.Key, ep); err != nil {
				return err
			}
		}
		h.watch(ld)
		return nil
	}
}
