package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This file holds the state machine. Every transition is made here, by the
// worker: one goroutine at a time, started on demand by kickLocked and gone
// when there is nothing left to do. The worker first runs the synchronous
// requests (jobs), then reconciles each scope with what it should be:
//
//	Pending  -> Loading    all required deps visible (Apply in a new goroutine)
//	Loading  -> Active     Apply returned nil and nothing it loaded against changed
//	Loading  -> Unloading  Apply failed (-> Failed), its epoch changed or Restart
//	                       (-> Pending), or it is disposed (-> Disposed)
//	Active   -> Unloading  its epoch changed or Restart (-> Pending), a service
//	                       it injects is going away (-> Pending), or disposed
//	Failed   -> Pending    Restart only
//	Pending, Failed -> Disposed
//
// A scope's epoch is its generation plus the token of the current provider
// of each key it injects; a load is current while its epoch is unchanged.

// job is a synchronous request (Dispose, withdrawal of a visible service,
// Close) run by the worker; callers wait on done.
type job struct {
	ctx  context.Context
	run  func(context.Context) error
	done chan struct{}
	err  error
}

// enqueueLocked queues a job for the worker.
func (r *Registry) enqueueLocked(ctx context.Context, run func(context.Context) error) *job {
	j := &job{ctx: ctx, run: run, done: make(chan struct{})}
	if r.finished { // everything is disposed already
		close(j.done)
		return j
	}
	r.jobs = append(r.jobs, j)
	r.kickLocked()
	return j
}

// kickLocked makes sure a worker will look at the current state. Every
// change that may call for a transition is made under mu and followed by a
// kick, and the worker only stops after finding nothing to do under mu, so
// no change is missed.
func (r *Registry) kickLocked() {
	if r.working || r.finished {
		return
	}
	r.working = true
	r.wg.Add(1)
	go r.work()
}

func (r *Registry) work() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		step := r.nextLocked()
		if step == nil {
			r.working = false
			r.notifyLocked() // Settled may be waiting for this
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		step()
		r.flush()
	}
}

// nextLocked picks the next transition to make, or nil if there is none.
func (r *Registry) nextLocked() func() {
	if len(r.jobs) > 0 {
		j := r.jobs[0]
		r.jobs[0] = nil
		r.jobs = r.jobs[1:]
		return func() {
			j.err = j.run(j.ctx)
			close(j.done)
		}
	}
	var ready []*Scope
	for _, s := range r.order {
		switch s.state {
		case Loading:
			if s.applied {
				return func() { r.finishLoad(s) }
			}
			if s.restart {
				return func() { _ = r.unload(context.Background(), s, Pending, "") }
			}
		case Active:
			if s.restart || !r.currentLocked(s) {
				return func() { _ = r.unload(context.Background(), s, Pending, "") }
			}
		case Failed:
			if s.restart {
				s.restart, s.failure = false, ""
				r.setLocked(s, Pending, "")
				return func() {}
			}
		case Pending:
			if !r.closed && r.readyLocked(s) {
				ready = append(ready, s)
			}
		}
	}
	if len(ready) > 0 {
		return func() { r.start(ready) }
	}
	return nil
}

// start moves ready scopes to Loading and runs their Apply in parallel.
func (r *Registry) start(ready []*Scope) {
	r.mu.Lock()
	for _, s := range ready {
		if s.state != Pending || r.closed || !r.readyLocked(s) {
			continue
		}
		s.attempt++
		s.loadGen = s.gen
		s.loadToks = s.loadToks[:0]
		for _, d := range s.inject {
			s.loadToks = append(s.loadToks, r.tokenLocked(s, d.Key))
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		s.applyDone = make(chan struct{})
		s.applied, s.applyErr = false, nil
		r.setLocked(s, Loading, "")
		r.wg.Add(1)
		go r.runApply(ctx, s, s.attempt, s.applyDone)
	}
	r.unlock()
}

func (r *Registry) runApply(ctx context.Context, s *Scope, attempt uint64, done chan struct{}) {
	defer r.wg.Done()
	err := callApply(ctx, s)
	r.mu.Lock()
	if s.attempt == attempt && s.state == Loading {
		s.applied, s.applyErr = true, err
		r.kickLocked()
	}
	close(done)
	r.mu.Unlock()
}

func callApply(ctx context.Context, s *Scope) (err error) {
	if s.apply == nil {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("apply panicked: %v", v)
		}
	}()
	return s.apply(ctx, s)
}

// finishLoad handles a returned Apply: Failed on error, a new load if the
// epoch moved on meanwhile, else Active, with its services made visible.
func (r *Registry) finishLoad(s *Scope) {
	r.mu.Lock()
	if s.state != Loading || !s.applied {
		r.mu.Unlock()
		return
	}
	if err := s.applyErr; err != nil {
		r.mu.Unlock()
		msg := err.Error()
		if msg == "" {
			msg = "apply failed"
		}
		_ = r.unload(context.Background(), s, Failed, msg)
		return
	}
	if s.restart || !r.currentLocked(s) {
		r.mu.Unlock()
		_ = r.unload(context.Background(), s, Pending, "")
		return
	}
	for _, e := range slices.Clone(s.effects) {
		if p := e.prov; p != nil && !e.claimed {
			if p.takeover {
				r.takeOverLocked(p)
			} else {
				p.visible = true
			}
		}
	}
	r.setLocked(s, Active, "")
	r.unlock()
}

// unload takes a Loading or Active scope down to state to (Pending, Failed
// or Disposed): every live scope injecting one of its visible keys first
// (recursively, to Pending), then, once its Apply has returned, its own
// effects in reverse order, one at a time. Pending and Failed scopes have
// no effects; they are only disposed. It returns every disposer error,
// dependents' included.
func (r *Registry) unload(ctx context.Context, s *Scope, to State, failure string) error {
	r.mu.Lock()
	switch s.state {
	case Loading, Active:
	case Pending, Failed:
		if to == Disposed {
			r.disposedLocked(s, "")
		}
		r.unlock()
		return nil
	default: // Unloading cannot be seen here (the worker is serial); Disposed is done
		r.mu.Unlock()
		return nil
	}
	// While stopping, s's services no longer satisfy anyone, so no
	// dependent can be found twice, and a dependency cycle among active
	// scopes cannot bring us back here.
	s.stopping = true
	r.notifyLocked()
	r.mu.Unlock()

	var errs []error
	for {
		r.mu.Lock()
		d := r.dependentLocked(s)
		r.mu.Unlock()
		if d == nil {
			break
		}
		if err := r.unload(ctx, d, Pending, ""); err != nil {
			errs = append(errs, err)
		}
	}

	r.mu.Lock()
	wasLoading, applyDone := s.state == Loading, s.applyDone
	r.setLocked(s, Unloading, "")
	s.cancel()
	r.unlock()
	if wasLoading {
		<-applyDone // Apply may still be registering effects; they are refused now
	}

	dctx := context.WithValue(ctx, workerKey{}, r)
	var own []error
	for {
		r.mu.Lock()
		n := len(s.effects)
		if n == 0 {
			r.mu.Unlock()
			break
		}
		e := s.effects[n-1]
		r.dropLocked(e)
		r.mu.Unlock()
		if e.dispose != nil {
			if err := runDispose(dctx, s, e); err != nil {
				own = append(own, err)
			}
		}
	}

	note := ""
	if err := errors.Join(own...); err != nil {
		note = "dispose: " + errText(err)
	}
	r.mu.Lock()
	s.stopping = false
	s.cancel, s.applyDone, s.applied, s.applyErr = nil, nil, false, nil
	switch to {
	case Pending:
		s.restart = false
		r.setLocked(s, Pending, note)
	case Failed:
		s.failure = failure
		r.setLocked(s, Failed, note)
	default:
		r.disposedLocked(s, note)
	}
	r.unlock()
	return errors.Join(append(errs, own...)...)
}

// withdrawNow is the job behind a visible service's withdraw function:
// unload every live scope injecting the key, then drop the service.
func (r *Registry) withdrawNow(ctx context.Context, p *provision) error {
	r.mu.Lock()
	if p.eff.claimed {
		r.mu.Unlock()
		return nil
	}
	p.withdrawing = true
	r.notifyLocked()
	r.mu.Unlock()
	var errs []error
	for {
		r.mu.Lock()
		var d *Scope
		if !p.eff.claimed { // a Replace may have taken it over meanwhile
			d = r.injectorLocked(p.key, p.eff.owner)
		}
		r.mu.Unlock()
		if d == nil {
			break
		}
		if err := r.unload(ctx, d, Pending, ""); err != nil {
			errs = append(errs, err)
		}
	}
	r.mu.Lock()
	if !p.eff.claimed {
		r.dropLocked(p.eff)
	}
	r.unlock()
	return errors.Join(errs...)
}

// closeAll is Close's job: dispose every scope, always one that no live
// scope depends on, latest added first.
func (r *Registry) closeAll(ctx context.Context) error {
	var errs []error
	for {
		r.mu.Lock()
		var victim *Scope
		for i := len(r.order) - 1; i >= 0 && victim == nil; i-- {
			if r.dependentLocked(r.order[i]) == nil {
				victim = r.order[i]
			}
		}
		if victim == nil && len(r.order) > 0 {
			victim = r.order[len(r.order)-1] // unload copes with what is left
		}
		r.mu.Unlock()
		if victim == nil {
			return errors.Join(errs...)
		}
		if err := r.unload(ctx, victim, Disposed, ""); err != nil {
			errs = append(errs, err)
		}
	}
}

// dependentLocked returns a live scope that injects one of s's visible
// keys, latest added first, or nil.
func (r *Registry) dependentLocked(s *Scope) *Scope {
	for i := len(r.order) - 1; i >= 0; i-- {
		d := r.order[i]
		if d == s || !liveLocked(d) {
			continue
		}
		for _, dep := range d.inject {
			if p := r.keys[dep.Key]; p != nil && p.visible && p.eff.owner == s {
				return d
			}
		}
	}
	return nil
}

// injectorLocked returns a live scope other than owner that injects key,
// latest added first, or nil.
func (r *Registry) injectorLocked(key string, owner *Scope) *Scope {
	for i := len(r.order) - 1; i >= 0; i-- {
		d := r.order[i]
		if d == owner || !liveLocked(d) {
			continue
		}
		for _, dep := range d.inject {
			if dep.Key == key {
				return d
			}
		}
	}
	return nil
}

// liveLocked reports whether s is loaded or loading and not being unloaded.
func liveLocked(s *Scope) bool {
	return (s.state == Loading || s.state == Active) && !s.stopping
}

// takeOverLocked swaps a Replace's provision in for the current one. The
// old provision's effect is dropped without running anything.
func (r *Registry) takeOverLocked(p *provision) {
	cur := r.keys[p.key]
	p.takeover = false
	p.visible = true
	if cur != nil && cur != p {
		if p.keep && cur.visible {
			p.token = cur.token
		}
		r.dropLocked(cur.eff)
	}
	r.keys[p.key] = p
	r.notifyLocked()
	r.kickLocked()
}

// dropLocked claims e: it leaves its scope's list and, for a service,
// the key table.
func (r *Registry) dropLocked(e *effect) {
	e.claimed = true
	e.owner.remove(e)
	if p := e.prov; p != nil && r.keys[p.key] == p {
		delete(r.keys, p.key)
	}
	r.notifyLocked()
}

// setLocked makes a transition and records its event.
func (r *Registry) setLocked(s *Scope, to State, note string) {
	from := s.state
	s.state = to
	r.notifyLocked()
	if r.observe == nil {
		return
	}
	reason := r.reasonLocked(s)
	if note != "" {
		if reason != "" {
			reason += "; "
		}
		reason += note
	}
	r.events = append(r.events, Event{Scope: s.id, From: from, To: to, Reason: reason})
}

// disposedLocked makes s Disposed and removes it from the registry.
func (r *Registry) disposedLocked(s *Scope, note string) {
	r.setLocked(s, Disposed, note)
	if r.scopes[s.id] == s {
		delete(r.scopes, s.id)
	}
	if i := slices.Index(r.order, s); i >= 0 {
		r.order = slices.Delete(r.order, i, i+1)
	}
	close(s.done)
}

func runDispose(ctx context.Context, s *Scope, e *effect) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s: effect %q panicked: %v", s.label, e.label, v)
		}
	}()
	if err := e.dispose(ctx); err != nil {
		return fmt.Errorf("%s: effect %q: %w", s.label, e.label, err)
	}
	return nil
}

// availableLocked returns the provision that satisfies key, if any: visible,
// its owner active and not going away.
func (r *Registry) availableLocked(key string) *provision {
	p := r.keys[key]
	if p == nil || !p.visible || p.withdrawing {
		return nil
	}
	if o := p.eff.owner; o.state != Active || o.stopping {
		return nil
	}
	return p
}

// tokenLocked is the epoch component of key for s: its provider's token,
// or 0 if there is none. A scope's own services do not count, or a scope
// injecting a key it provides would reload for ever.
func (r *Registry) tokenLocked(s *Scope, key string) uint64 {
	if p := r.availableLocked(key); p != nil && p.eff.owner != s {
		return p.token
	}
	return 0
}

func (r *Registry) newTokenLocked() uint64 {
	r.token++
	return r.token
}

// currentLocked reports whether s's load still matches its epoch.
func (r *Registry) currentLocked(s *Scope) bool {
	if s.loadGen != s.gen || len(s.loadToks) != len(s.inject) {
		return false
	}
	for i, d := range s.inject {
		if r.tokenLocked(s, d.Key) != s.loadToks[i] {
			return false
		}
	}
	return true
}

// missingLocked returns the sorted required keys of s that are not
// available.
func (r *Registry) missingLocked(s *Scope) []string {
	var out []string
	for _, d := range s.inject {
		if !d.Optional && r.availableLocked(d.Key) == nil {
			out = append(out, d.Key)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (r *Registry) readyLocked(s *Scope) bool { return len(r.missingLocked(s)) == 0 }

func (r *Registry) reasonLocked(s *Scope) string {
	switch s.state {
	case Pending:
		if m := r.missingLocked(s); len(m) > 0 {
			return "waiting for: " + strings.Join(m, ", ")
		}
	case Failed:
		return s.failure
	}
	return ""
}

// errText renders joined errors on one line, for event reasons.
func errText(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
