package registry

import (
	"context"
	"errors"
	"slices"
)

// Scope is one plugin in the registry: it injects keys, and owns the
// effects (services included) its Apply registers. The fields from state on
// are guarded by r.mu; the ones above are fixed by Add.
type Scope struct {
	r      *Registry
	id     string
	label  string
	inject []Dep
	apply  func(context.Context, *Scope) error
	done   chan struct{} // closed when Disposed

	state    State
	stopping bool   // the worker is unloading its dependents before unloading it
	failure  string // the Failed reason
	gen      uint64
	restart  bool // Restart was called and not yet honoured
	effects  []*effect

	// The current load: what it was started against (its epoch), how to
	// cancel it and what its Apply returned.
	attempt   uint64
	loadGen   uint64
	loadToks  []uint64 // token of each inject key's provider at load time, 0 for none
	cancel    context.CancelFunc
	applyDone chan struct{}
	applied   bool
	applyErr  error

	disposeJob *job
}

// effect is one thing a scope registered. Once claimed it is out of its
// scope's list and its dispose never runs again.
type effect struct {
	owner   *Scope
	label   string
	dispose func(context.Context) error
	prov    *provision // set for services
	claimed bool
}

// provision is a value provided under a key. Its token identifies the
// provision as dependents see it: dependents reload when the token of a key
// they inject changes.
type provision struct {
	eff         *effect
	key         string
	value       any
	token       uint64
	visible     bool // owner turned Active (reserved while it loads)
	takeover    bool // a Replace waiting for its loading owner to turn Active
	keep        bool // that Replace keeps the old token (dependents untouched)
	withdrawing bool // its dependents are being unloaded before it goes
	job         *job // the pending withdrawal
}

// ID returns the scope's id.
func (s *Scope) ID() string { return s.id }

// Label returns the scope's human label.
func (s *Scope) Label() string { return s.label }

// State returns the scope's current state.
func (s *Scope) State() State {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.state
}

// Reason explains the state: for Pending "waiting for: a, b" (the sorted
// missing required keys), for Failed the error text, else "".
func (s *Scope) Reason() string {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.r.reasonLocked(s)
}

// Done returns a channel closed when the scope is Disposed.
func (s *Scope) Done() <-chan struct{} { return s.done }

// admitLocked refuses effects unless the scope is loading or active.
func (s *Scope) admitLocked(what string) error {
	if s.state != Loading && s.state != Active {
		return &InactiveError{Scope: s.label, State: s.state, What: what}
	}
	return nil
}

// addLocked appends an effect to the scope's list.
func (s *Scope) addLocked(label string, dispose func(context.Context) error) *effect {
	e := &effect{owner: s, label: label, dispose: dispose}
	s.effects = append(s.effects, e)
	s.r.notifyLocked()
	return e
}

// Provide exposes value under key, as an effect labelled "service <key>".
// It is allowed while the scope is Loading or Active (else *InactiveError).
// A key provided while loading is reserved, and becomes visible when the
// scope turns Active; from an Active scope it is visible at once. A key
// that already has a live provider is refused with *DuplicateProviderError.
//
// The returned function withdraws the key: first every loading or active
// scope that injects it is unloaded, then the key vanishes. It is
// idempotent. It returns at once when the key is already being withdrawn or
// its scope is already unloading (that work withdraws it, in order), and
// when the key is only reserved (nobody can depend on it yet).
func (s *Scope) Provide(key string, value any) (func(), error) {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := s.admitLocked("service " + key); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, errors.New("registry: scope " + s.label + " provides an empty key")
	}
	if cur := r.keys[key]; cur != nil {
		return nil, &DuplicateProviderError{Key: key, Owner: s.label, Existing: cur.eff.owner.label}
	}
	if s.takeoverLocked(key) != nil {
		return nil, &DuplicateProviderError{Key: key, Owner: s.label, Existing: s.label}
	}
	p := s.provisionLocked(key, value)
	p.visible = s.state == Active
	r.keys[key] = p
	r.kickLocked()
	return func() { r.withdraw(p) }, nil
}

// Replace provides value under key, taking the key over (make before
// break) if another scope owns it; if nobody does it behaves like Provide,
// and if this scope owns it the value is updated in place. The old owner's
// service effect becomes inert: it leaves the old scope's effect list and
// its withdraw function does nothing any more.
//
// With KeepDependents the provision keeps its token: dependents stay active
// and untouched and Lookup returns the new value at once. With
// ReloadDependents a new token is made, so dependents reload against the
// new value.
//
// From a Loading scope the take-over happens when the scope turns Active,
// so a provider that fails never displaces the old one. The returned
// function withdraws the key like Provide's.
func (s *Scope) Replace(key string, value any, dependents Dependents) (func(), error) {
	keepDependents := dependents == KeepDependents
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := s.admitLocked("service " + key); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, errors.New("registry: scope " + s.label + " provides an empty key")
	}
	p := s.takeoverLocked(key)
	if cur := r.keys[key]; p == nil && cur != nil && cur.eff.owner == s {
		p = cur
	}
	switch {
	case p != nil: // already ours: update in place
		p.value = value
		if p.takeover {
			p.keep = keepDependents
		} else if p.visible && !keepDependents {
			p.token = r.newTokenLocked()
		}
		r.notifyLocked()
	case r.keys[key] == nil:
		p = s.provisionLocked(key, value)
		p.visible = s.state == Active
		r.keys[key] = p
	default:
		p = s.provisionLocked(key, value)
		p.takeover, p.keep = true, keepDependents
		if s.state == Active {
			r.takeOverLocked(p)
		}
	}
	r.kickLocked()
	return func() { r.withdraw(p) }, nil
}

// Dependents says what a Replace does to the scopes that inject the key.
type Dependents int

const (
	// ReloadDependents unloads them and loads them again against the new
	// value (their provider's state for them is gone).
	ReloadDependents Dependents = iota
	// KeepDependents leaves them active: the new value serves them as the
	// old one did.
	KeepDependents
)

// provisionLocked registers a new service effect of s with a fresh token.
func (s *Scope) provisionLocked(key string, value any) *provision {
	p := &provision{key: key, value: value, token: s.r.newTokenLocked()}
	p.eff = s.addLocked("service "+key, nil)
	p.eff.prov = p
	return p
}

// takeoverLocked returns s's pending take-over of key, if any.
func (s *Scope) takeoverLocked(key string) *provision {
	for _, e := range s.effects {
		if p := e.prov; p != nil && p.takeover && p.key == key {
			return p
		}
	}
	return nil
}

// Effect registers an effect: dispose runs when the scope unloads (in
// reverse registration order, serially, with the unload's ctx) or when the
// returned function is called, whichever comes first, and never twice.
// It is allowed while the scope is Loading or Active, else it returns an
// *InactiveError. The returned function runs dispose in the caller's
// goroutine (with context.Background(), discarding its error); when the
// scope is already unloading it returns at once and the unload runs it in
// order. dispose may be nil.
func (s *Scope) Effect(label string, dispose func(context.Context) error) (func(), error) {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := s.admitLocked(label); err != nil {
		return nil, err
	}
	e := s.addLocked(label, dispose)
	return func() { r.release(e) }, nil
}

// release is an effect's own disposer.
func (r *Registry) release(e *effect) {
	r.mu.Lock()
	if e.claimed || e.owner.state == Unloading || e.owner.stopping {
		r.mu.Unlock() // the unload under way runs it, in order
		return
	}
	r.dropLocked(e)
	r.mu.Unlock()
	if e.dispose != nil {
		_ = runDispose(context.Background(), e.owner, e)
	}
}

// withdraw is a service's own disposer.
func (r *Registry) withdraw(p *provision) {
	r.mu.Lock()
	switch {
	case p.eff.claimed, p.withdrawing, p.eff.owner.state == Unloading, p.eff.owner.stopping:
		r.mu.Unlock() // gone, or going in order with the work under way
		return
	case !p.visible:
		// Reserved or a pending take-over: nobody can depend on it yet.
		r.dropLocked(p.eff)
		r.mu.Unlock()
		return
	}
	j := p.job
	if j == nil {
		j = r.enqueueLocked(context.Background(), func(ctx context.Context) error { return r.withdrawNow(ctx, p) })
		p.job = j
	}
	r.mu.Unlock()
	<-j.done
}

// Restart re-enters the scope explicitly: a Failed scope goes back to
// Pending (and loads when ready); an Active or Loading one is unloaded
// (dependents first), goes to Pending and loads again. It is a no-op on a
// Pending or Disposed scope. It returns at once; use Registry.Settled to
// wait for the outcome.
func (s *Scope) Restart() {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.state == Pending || s.state == Disposed {
		return
	}
	s.restart = true
	r.kickLocked()
}

// Bump increments the scope's generation (e.g. its configuration changed).
// It is level-triggered: an Active scope reloads, a Loading one reloads
// after its Apply returns, a Pending one will load with the new generation.
// A Failed scope stays failed (see Restart). It returns at once.
func (s *Scope) Bump() {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.state == Disposed {
		return
	}
	s.gen++
	r.notifyLocked()
	r.kickLocked()
}

// Dispose unloads the scope for good: first every scope that depends on its
// services (they go back to Pending, or reload without an optional
// service), then its own effects in reverse order, serially. The scope then
// is Disposed and removed from the registry, so its id may be reused. It
// works from any state, and returns the disposers' errors joined (panics
// included). It is idempotent: concurrent calls share the result, calls
// after the scope is disposed return nil.
//
// The disposers get ctx. If ctx ends before the work is done, Dispose
// returns ctx.Err() and the disposal completes in the background. Called
// from a disposer with the disposer's ctx, it only schedules the work and
// returns nil.
func (s *Scope) Dispose(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	r := s.r
	r.mu.Lock()
	if s.state == Disposed {
		r.mu.Unlock()
		return nil
	}
	j := s.disposeJob
	if j == nil {
		j = r.enqueueLocked(ctx, func(ctx context.Context) error { return r.unload(ctx, s, Disposed, "") })
		s.disposeJob = j
	}
	r.mu.Unlock()
	if r.onWorker(ctx) {
		return nil
	}
	select {
	case <-j.done:
		return j.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// remove takes e out of its scope's effect list.
func (s *Scope) remove(e *effect) {
	if i := slices.Index(s.effects, e); i >= 0 {
		s.effects = slices.Delete(s.effects, i, i+1)
	}
}
