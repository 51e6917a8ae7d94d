package host

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A slot is where the calls of one loaded scope find its process. The
// scope (its services, tools and other effects) outlives the processes in
// its slot: a crashed process is replaced in place while the slot says
// RESTARTING, so the key stays bound, dependents stay active and tools stay
// listed; calls that arrive meanwhile wait (bounded) for the new process.
// A consumer can also be moved to a new process make-before-break (swap).
type slot struct {
	mu      sync.Mutex
	cur     *load
	state   slotState
	ready   chan struct{} // closed when a restart ends, either way
	failure string        // why the last restart gave up
	misses  int           // health checks missed in a row
	closed  bool          // the scope is unloading: no more processes
	cancel  context.CancelFunc
	ctx     context.Context // done when the scope unloads
	// onChange hears of every change status shows (the console's
	// signal), outside mu.
	onChange func()

	touched map[string]bool // keys the scope's processes have called
}

type slotState int

const (
	serving slotState = iota
	restarting
	abandoned // a restart gave up (crash loop); the scope is unloading
)

func newSlot(onChange func()) *slot {
	ctx, cancel := context.WithCancel(context.Background())
	if onChange == nil {
		onChange = func() {}
	}
	return &slot{ctx: ctx, cancel: cancel, touched: map[string]bool{}, onChange: onChange}
}

// errRestarting is what a call gets when the provider did not come back
// within the wait.
type errRestarting struct {
	id     string
	waited time.Duration
}

func (e *errRestarting) Error() string {
	return fmt.Sprintf("plugin %q crashed and is restarting; it was not back within %v, try again in a moment", e.id, e.waited)
}

// get returns the current process, waiting up to wait while it restarts.
func (sl *slot) get(ctx context.Context, id string, wait time.Duration) (*load, error) {
	sl.mu.Lock()
	if sl.state == serving && sl.cur != nil {
		ld := sl.cur
		if !ld.proc.Gone() || ld.stopping.Load() {
			sl.mu.Unlock()
			return ld, nil
		}
		// Dead, and its supervisor has not seen it yet: the call waits
		// for the new process, as if the restart had begun.
		sl.beginRestartLocked()
	}
	ready := sl.ready
	sl.mu.Unlock()
	if ready != nil {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ready:
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	switch {
	case sl.state == serving && sl.cur != nil:
		return sl.cur, nil
	case sl.state == abandoned:
		return nil, fmt.Errorf("plugin %q crashed and could not be restarted: %s", id, sl.failure)
	case sl.closed:
		return nil, fmt.Errorf("plugin %q is stopping", id)
	}
	return nil, &errRestarting{id: id, waited: wait}
}

// current is the slot's process, restarting or not (nil before the first).
func (sl *slot) current() *load {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.cur
}

// set makes ld the slot's process and ends a restart. It returns false
// (and changes nothing) once the slot is closed.
func (sl *slot) set(ld *load) bool {
	defer sl.onChange()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.closed {
		return false
	}
	sl.cur, sl.state, sl.misses = ld, serving, 0
	if sl.ready != nil {
		close(sl.ready)
		sl.ready = nil
	}
	return true
}

// replace makes ld the slot's process in place of old, and ends a restart.
// It returns false (and changes nothing) once the slot is closed or holds
// another process than old: a swap and an in-place restart of the same
// slot race, and only the first may put its process in.
func (sl *slot) replace(old, ld *load) bool {
	defer sl.onChange()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.closed || sl.cur != old {
		return false
	}
	sl.cur, sl.state, sl.misses = ld, serving, 0
	if sl.ready != nil {
		close(sl.ready)
		sl.ready = nil
	}
	return true
}

// beginRestart marks the slot RESTARTING; calls wait from now on.
func (sl *slot) beginRestart() {
	defer sl.onChange()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.beginRestartLocked()
}

func (sl *slot) beginRestartLocked() {
	if sl.closed || sl.state != serving {
		return
	}
	sl.state = restarting
	sl.ready = make(chan struct{})
}

// abandon ends a restart that gave up; waiting calls fail with why.
func (sl *slot) abandon(why string) {
	defer sl.onChange()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.state, sl.failure = abandoned, why
	if sl.ready != nil {
		close(sl.ready)
		sl.ready = nil
	}
}

// close is the end of the slot (its scope unloads): it cancels a restart
// under way and returns the process to stop.
func (sl *slot) close() *load {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.closed = true
	sl.cancel()
	if sl.ready != nil {
		close(sl.ready)
		sl.ready = nil
	}
	return sl.cur
}

// live reports whether the slot's scope still serves (not closed).
func (sl *slot) live() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return !sl.closed && sl.state != abandoned
}

// missed records a health check without answer and returns how many in a
// row; answered resets the count.
func (sl *slot) missed() int {
	defer sl.onChange()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.misses++
	return sl.misses
}

func (sl *slot) answered() {
	sl.mu.Lock()
	was := sl.misses
	sl.misses = 0
	sl.mu.Unlock()
	if was > 0 {
		sl.onChange() // healthy again
	}
}

// status says what `dsh status` shows over an active scope's state: "" for
// serving, else "restarting" or "unhealthy (…)".
func (sl *slot) status() (string, string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	switch {
	case sl.state == restarting:
		return "restarting", "crashed; a new process is starting"
	case sl.state == abandoned:
		return "failed", sl.failure
	case sl.misses > 0:
		return "unhealthy", fmt.Sprintf("missed %d health check(s) in a row", sl.misses)
	}
	return "", ""
}

// touch records that the scope called key; it reports whether this is the
// first time.
func (sl *slot) touch(key string) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.touched[key] {
		return false
	}
	sl.touched[key] = true
	return true
}

func (sl *slot) hasTouched(key string) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.touched[key]
}
