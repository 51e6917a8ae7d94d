// Package registry is the in-process context registry of the dsh plugin
// host, modelled on Cordis.
//
// It owns:
//   - services: values exposed under keys (ctx.<key>), one provider per key;
//   - scopes: one per plugin, each declaring the keys it injects, loaded by
//     running its Apply once every required key is provided;
//   - effects: everything a scope registers (services included), disposed
//     with the scope in reverse registration order;
//   - the lifecycle: a scope is reloaded when something it depends on
//     changes, and everything that depends on a service is unloaded before
//     the service goes away.
//
// It does not start processes, do I/O, log, read configuration or decide
// what a plugin is; it does not reject dependency cycles (the loader detects
// them statically; here such scopes simply stay pending). Cycles through
// optional dependencies are the loader's business too: they make the scopes
// involved reload each other for ever.
//
// # Concurrency
//
// Every method is safe for concurrent use. State transitions (loading,
// committing, unloading, disposing) are made by one worker goroutine at a
// time, so unloads are serial and their order is well defined; Apply
// functions run in goroutines of their own. Methods that only record a wish
// (Add, Bump, Restart, Provide, Replace, Effect) never wait for the worker.
// Methods that wait for it (Scope.Dispose, Registry.Close and the withdraw
// functions of visible services) must therefore not be called from where the
// worker would be waiting: from a disposer (call them with the disposer's
// ctx: Dispose and Close then only schedule the work), from Observe, or from
// an Apply that the worker may be unloading (pass Apply's ctx to Dispose so
// it returns when that Apply is cancelled).
package registry

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// State is where a scope is in its lifecycle.
type State int

const (
	// Pending scopes wait for their required dependencies (or for their
	// turn to load).
	Pending State = iota
	// Loading scopes are running their Apply.
	Loading
	// Active scopes have applied successfully; their services are visible.
	Active
	// Failed scopes' Apply returned an error; only Scope.Restart re-enters
	// them.
	Failed
	// Unloading scopes are disposing their effects; admission is closed.
	Unloading
	// Disposed scopes are gone from the registry for good.
	Disposed
)

var stateNames = [...]string{"pending", "loading", "active", "failed", "unloading", "disposed"}

// String returns the lower-case name of the state, e.g. "active".
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Dep is one key a scope injects.
type Dep struct {
	// Key is the service key.
	Key string
	// Optional deps do not keep the scope pending; the scope is reloaded
	// when their provider appears, changes or goes away.
	Optional bool
}

// Spec describes a scope to Registry.Add.
type Spec struct {
	// ID is unique among live scopes (e.g. the composition entry id);
	// required, non-empty.
	ID string
	// Label is the human label used in errors, e.g.
	// `"env" (bin/dsh-shell-env)`; it defaults to the quoted ID.
	Label string
	// Inject lists the keys the scope depends on.
	Inject []Dep
	// Apply runs (in its own goroutine) when every required dependency is
	// provided and visible. It registers effects on s. ctx is cancelled when
	// this load of the scope ends, in particular when the scope must unload
	// while Apply is still running. A non-nil error (or a panic) makes the
	// scope Failed, after the effects registered so far are disposed in
	// reverse order. A nil Apply loads nothing and succeeds. Apply should
	// return soon after ctx is cancelled: the unload, like every other
	// transition, waits for it.
	Apply func(ctx context.Context, s *Scope) error
}

// Options configures a Registry.
type Options struct {
	// Observe, if set, receives every state transition in the order they
	// happen, never concurrently and never while the registry is locked.
	// It runs on the registry's worker, so it must not wait for the registry
	// (Settled, Dispose, Close); reading it (Snapshot, Lookup) is fine.
	// A panic in Observe is recovered and ignored.
	Observe func(Event)
}

// Event is one state transition of one scope.
type Event struct {
	// Scope is the id of the scope.
	Scope string
	// From and To are the states before and after the transition.
	From, To State
	// Reason is the scope's reason after the transition (see
	// ScopeInfo.Reason). When the transition ends an unload whose disposers
	// failed, "dispose: <errors>" is appended, so errors of implicit reloads
	// are not lost.
	Reason string
}

// ScopeInfo is a point-in-time copy of a scope's public state.
type ScopeInfo struct {
	// ID and Label are the scope's id and human label.
	ID, Label string
	// State is the scope's state.
	State State
	// Reason explains the state: for Pending "waiting for: jobs, shell"
	// (the sorted missing required keys), for Failed the error text, else "".
	Reason string
	// Inject is a copy of the scope's dependencies.
	Inject []Dep
	// Provides are the visible keys the scope owns, sorted.
	Provides []string
	// Effects are the labels of the scope's live effects, in registration
	// order.
	Effects []string
	// Generation counts Scope.Bump calls.
	Generation uint64
}

// Registry is the context registry. The zero value is not usable; call New.
type Registry struct {
	observe func(Event)

	mu       sync.Mutex
	scopes   map[string]*Scope
	order    []*Scope              // live scopes in Add order: the worker's scan order
	keys     map[string]*provision // the live (visible or reserved) provision of each key
	closed   bool                  // admission closed: no Add, no more loads
	finished bool                  // Close has completed: no goroutine may start
	closeJob *job
	jobs     []*job // synchronous requests for the worker, FIFO
	working  bool   // a worker goroutine is running
	changed  chan struct{}
	token    uint64  // last provision token handed out; 0 means "none"
	events   []Event // transitions not yet delivered to observe

	emu sync.Mutex     // serialises delivery to observe
	wg  sync.WaitGroup // the worker and Apply goroutines, waited for by Close
}

// New returns an empty registry.
func New(opts Options) *Registry {
	return &Registry{
		observe: opts.Observe,
		scopes:  map[string]*Scope{},
		keys:    map[string]*provision{},
		changed: make(chan struct{}),
	}
}

// Add registers a new Pending scope; it loads as soon as its required
// dependencies are visible. It fails when the id is empty or already used
// by a live scope, when an injected key is empty, and with ErrClosed once
// the registry is closed.
func (r *Registry) Add(spec Spec) (*Scope, error) {
	label := spec.Label
	if label == "" {
		label = strconv.Quote(spec.ID)
	}
	if spec.ID == "" {
		return nil, fmt.Errorf("registry: scope %s has an empty id", label)
	}
	for _, d := range spec.Inject {
		if d.Key == "" {
			return nil, fmt.Errorf("registry: scope %s injects an empty key", label)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("cannot add scope %s: %w", label, ErrClosed)
	}
	if old := r.scopes[spec.ID]; old != nil {
		return nil, fmt.Errorf("registry: scope id %q is already used by %s; cannot add %s", spec.ID, old.label, label)
	}
	s := &Scope{
		r:      r,
		id:     spec.ID,
		label:  label,
		inject: slices.Clone(spec.Inject),
		apply:  spec.Apply,
		done:   make(chan struct{}),
	}
	r.scopes[s.id] = s
	r.order = append(r.order, s)
	r.notifyLocked()
	r.kickLocked()
	return s, nil
}

// Lookup returns the value provided under key, and its owner, if the key is
// visible (its provider is active). Keys reserved by a scope that is still
// loading are not visible.
func (r *Registry) Lookup(key string) (value any, owner *Scope, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.keys[key]
	if p == nil || !p.visible {
		return nil, nil, false
	}
	return p.value, p.eff.owner, true
}

// Scope returns the live (not disposed) scope with the given id.
func (r *Registry) Scope(id string) (*Scope, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.scopes[id]
	return s, ok
}

// Snapshot returns the state of every live scope, sorted by id.
func (r *Registry) Snapshot() []ScopeInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	provides := map[*Scope][]string{}
	for k, p := range r.keys {
		if p.visible {
			provides[p.eff.owner] = append(provides[p.eff.owner], k)
		}
	}
	out := make([]ScopeInfo, 0, len(r.order))
	for _, s := range r.order {
		info := ScopeInfo{
			ID:         s.id,
			Label:      s.label,
			State:      s.state,
			Reason:     r.reasonLocked(s),
			Inject:     slices.Clone(s.inject),
			Provides:   provides[s],
			Generation: s.gen,
		}
		slices.Sort(info.Provides)
		for _, e := range s.effects {
			info.Effects = append(info.Effects, e.label)
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b ScopeInfo) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// Settled blocks until the registry is at rest: no scope is loading or
// unloading, no pending scope is ready to load and no reload or disposal is
// outstanding. It returns ctx.Err() if ctx ends first.
func (r *Registry) Settled(ctx context.Context) error {
	for {
		r.mu.Lock()
		settled := !r.working
		for _, s := range r.order {
			if s.state == Loading || s.state == Unloading {
				settled = false
				break
			}
		}
		ch := r.changed
		r.mu.Unlock()
		if settled {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Changed returns a channel that is closed at the next change of any
// scope's state, provision or effects (and when the registry comes to
// rest). Call it again after each wake-up: it is a level-triggered watch,
// so read the state (Snapshot) after the channel closes.
func (r *Registry) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Close closes admission (Add fails with ErrClosed, pending scopes never
// load again), then disposes every scope, dependents before their
// providers, one at a time, and returns the disposers' errors joined. The
// disposers get ctx and should respect it, but every remaining disposer is
// still called after ctx ends. Close waits for the registry's goroutines to
// end (including Apply calls, which are cancelled). It is idempotent: every
// call returns the same result. Called from a disposer with the disposer's
// ctx, it only schedules the work and returns nil.
func (r *Registry) Close(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		r.notifyLocked()
	}
	j := r.closeJob
	if j == nil {
		j = r.enqueueLocked(ctx, r.closeAll)
		r.closeJob = j
	}
	r.mu.Unlock()
	if r.onWorker(ctx) {
		return nil
	}
	<-j.done
	r.mu.Lock()
	r.finished = true
	r.mu.Unlock()
	r.wg.Wait()
	return j.err
}

// workerKey marks the ctx handed to disposers, so that Dispose and Close
// called from a disposer do not wait for the worker that runs them.
type workerKey struct{}

func (r *Registry) onWorker(ctx context.Context) bool {
	v, _ := ctx.Value(workerKey{}).(*Registry)
	return v == r
}

// notifyLocked wakes everyone waiting on Changed.
func (r *Registry) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// unlock releases the state lock, then delivers the transitions recorded
// under it.
func (r *Registry) unlock() {
	r.mu.Unlock()
	r.flush()
}

// flush delivers queued events in order. Events are queued under mu and
// taken off the queue under emu, so deliveries never overlap or reorder.
func (r *Registry) flush() {
	if r.observe == nil {
		return
	}
	r.emu.Lock()
	defer r.emu.Unlock()
	for {
		r.mu.Lock()
		if len(r.events) == 0 {
			r.events = nil
			r.mu.Unlock()
			return
		}
		ev := r.events[0]
		r.events = r.events[1:]
		r.mu.Unlock()
		r.deliver(ev)
	}
}

func (r *Registry) deliver(ev Event) {
	defer func() { _ = recover() }() // an observer's bug must not take the worker down
	r.observe(ev)
}
