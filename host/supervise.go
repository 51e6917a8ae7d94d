package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/registry"
)

// Supervision: a plugin process that exits on its own, or that the pulse
// killed for not answering, is a crash. After an exponential backoff a new
// process takes its place in the scope's slot (RESTARTING meanwhile): the
// scope, its services and its tools stay, and dependents keep running. Too
// many crashes in a window make it FAILED ("crash loop"): only then are its
// services withdrawn and its dependents sent back to pending, until an
// explicit reload.

const (
	crashWindow = time.Minute
	crashLimit  = 5
	backoffBase = 200 * time.Millisecond
	backoffMax  = 30 * time.Second
)

type supervision struct {
	crashes   []time.Time
	nextStart time.Time
	loop      bool
	restarts  int
	lastErr   string // what the last crash was, for the tools it takes down
}

// recordCrash notes a crash (what happened: why) and returns the backoff
// before the next start and whether the plugin is now in a crash loop.
func (en *entry) recordCrash(now time.Time, why string) (time.Duration, bool) {
	defer en.h.noteEntryError(en, "crashed: "+why) // once en.mu is released
	en.mu.Lock()
	defer en.mu.Unlock()
	sup := &en.sup
	sup.lastErr = why
	kept := sup.crashes[:0]
	for _, t := range sup.crashes {
		if now.Sub(t) < crashWindow {
			kept = append(kept, t)
		}
	}
	sup.crashes = append(kept, now)
	n := len(sup.crashes)
	backoff := backoffBase << (n - 1)
	if backoff > backoffMax || backoff <= 0 {
		backoff = backoffMax
	}
	sup.nextStart = now.Add(backoff)
	sup.loop = n >= crashLimit
	sup.restarts++
	return backoff, sup.loop
}

// resetCrashes forgets past crashes (an explicit reload).
func (en *entry) resetCrashes() {
	en.mu.Lock()
	defer en.mu.Unlock()
	en.sup.crashes, en.sup.loop, en.sup.nextStart, en.sup.lastErr = nil, false, time.Time{}, ""
}

// waitBackoff holds a restart until the backoff has passed, and refuses to
// start a plugin in a crash loop.
func (en *entry) waitBackoff(ctx context.Context) error {
	en.mu.Lock()
	loop, next, n := en.sup.loop, en.sup.nextStart, len(en.sup.crashes)
	en.mu.Unlock()
	if loop {
		return fmt.Errorf("crash loop: %d crashes within %v; fix it, then run `dsh reload %s`", n, crashWindow, en.id)
	}
	if d := time.Until(next); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// watch supervises a load that is serving: its exit and its pulse.
func (h *Host) watch(ld *load) {
	go h.watchExit(ld)
	go h.pulse(ld)
}

// exitWordWait bounds the wait for how a crashed plugin ended (its exit
// status or signal), which comes once it is reaped: at once, unless
// something still holds its output open.
const exitWordWait = 500 * time.Millisecond

// watchExit turns an unexpected exit into a supervised restart. A crash is
// not a withdrawal: the process is replaced in its slot (RESTARTING) while
// its scope, services and tools stay; only a crash loop withdraws them.
func (h *Host) watchExit(ld *load) {
	<-ld.proc.Exited()
	if ld.stopping.Load() || h.closing.Load() {
		return
	}
	en := ld.en
	why := "its process exited unexpectedly"
	if ld.unresponsive.Load() {
		why = "its process stopped answering its health checks and was killed"
	}
	backoff, loop := en.recordCrash(time.Now(), why)
	if loop {
		h.log.Error("plugin crashed again: crash loop, not restarting", "entry", en.id, "binary", ld.proc.Binary(), "pid", ld.proc.Pid(), "exit", ld.proc.ExitReason(exitWordWait))
		ld.slot.abandon(fmt.Sprintf("crash loop: %d crashes within %v", crashLimit, crashWindow))
		ld.scope.Restart() // its Apply refuses the crash loop: FAILED
		return
	}
	ld.slot.beginRestart()
	h.log.Error("plugin crashed; restarting", "entry", en.id, "binary", ld.proc.Binary(), "pid", ld.proc.Pid(), "exit", ld.proc.ExitReason(exitWordWait), "backoff", backoff)
	if !h.bgAdd() {
		return // the host is closing
	}
	defer h.bg.Done()
	// What go-plugin holds for the dead process (its broker, its
	// connection) goes now; the scope lives on with a new process.
	h.stopProcess(ld.proc)
	h.restartInPlace(ld)
}

// restartInPlace starts a new process for a crashed one's slot, after the
// backoff, until one applies, the slot closes, or the crashes make a loop.
func (h *Host) restartInPlace(old *load) {
	en, sl := old.en, old.slot
	for {
		if err := en.waitBackoff(sl.ctx); err != nil {
			if sl.ctx.Err() != nil {
				return // the scope is unloading
			}
			h.log.Error("plugin not restarted", "entry", en.id, "error", err)
			sl.abandon(err.Error())
			old.scope.Restart() // its Apply refuses the crash loop: FAILED
			return
		}
		if sl.current() != old {
			return // a swap already put a new process in
		}
		ld, err := h.startInSlot(old)
		if err == nil {
			h.log.Info("plugin restarted", "entry", en.id, "pid", ld.proc.Pid())
			h.afterRestart(ld)
			return
		}
		if sl.ctx.Err() != nil || h.closing.Load() || errors.Is(err, errSuperseded) {
			return
		}
		backoff, _ := en.recordCrash(time.Now(), "a new process could not start: "+startCause(err))
		h.log.Error("plugin restart failed", "entry", en.id, "error", err, "backoff", backoff)
	}
}

// startCause is why a process could not start, in one line, without the
// plugin and binary its error repeats (the sentence that quotes it names
// them).
func startCause(err error) string {
	var pe *pluginproc.Error
	if errors.As(err, &pe) {
		err = pe.Err
	}
	line, _, _ := strings.Cut(err.Error(), "\n")
	return strings.TrimRight(line, ": ")
}

// errSuperseded is startInSlot's error when the slot no longer holds the
// process it was to replace (another restart or swap came first).
var errSuperseded = errors.New("the slot already holds a newer process")

// startInSlot starts a new process of old's entry, applies it in old's
// scope and makes it the slot's process, if the slot still holds old. Tools
// it registers replace those of the process before it.
func (h *Host) startInSlot(old *load) (*load, error) {
	proc, err := h.startProcess(old.slot.ctx, old.en.id, old.target.binary, old.target.sha256)
	if err != nil {
		return nil, err
	}
	return h.applyInSlot(old, proc)
}

// applyInSlot is startInSlot with the process already started.
func (h *Host) applyInSlot(old *load, proc *pluginproc.Process) (*load, error) {
	en, sl := old.en, old.slot
	ctx := sl.ctx
	ld, _, err := h.applyProcess(ctx, en, old.scope, sl, old.desc, proc, old.target)
	if err == nil && !sl.replace(old, ld) {
		err = fmt.Errorf("plugin %q is stopping", en.id)
		if sl.current() != old {
			err = errSuperseded
		}
	}
	if err != nil {
		ld.stopping.Store(true)
		h.stopProcess(proc)
		return nil, err
	}
	en.moveCurrent(old, ld)
	h.watch(ld)
	return ld, nil
}

// afterRestart honours caller_state: a restarted provider has lost what
// its callers registered with it, so every live consumer that called it
// moves to a new process (make-before-break), which registers again.
func (h *Host) afterRestart(ld *load) {
	var keys []string
	for _, p := range ld.desc.Provides {
		if p.CallerState {
			keys = append(keys, p.Key)
		}
	}
	if len(keys) == 0 {
		return
	}
	for _, en := range h.entryList() {
		cur := en.current()
		if cur == nil || en == ld.en {
			continue
		}
		for _, k := range keys {
			if cur.slot.hasTouched(k) && h.bgAdd() {
				go func() {
					defer h.bg.Done()
					h.swap(cur, "its provider of "+k+" restarted")
				}()
				break
			}
		}
	}
}

// swap moves a serving load's slot to a new process make-before-break: the
// new one applies (registering again what the scope registered), takes the
// slot, then the old one's calls in flight finish (bounded) before it stops.
// If the new one fails, the old one keeps serving.
func (h *Host) swap(old *load, why string) {
	en := old.en
	ld, err := h.startInSlot(old)
	if err != nil {
		if errors.Is(err, errSuperseded) || old.slot.ctx.Err() != nil || h.closing.Load() || old.proc.Gone() {
			return // a restart or the unload of its scope has it in hand
		}
		// The old process keeps serving, but without what it registered
		// with the restarted provider: restart the scope, so that it
		// registers again or says why it cannot (FAILED).
		h.log.Error("plugin not moved to a new process; restarting it", "entry", en.id, "reason", why, "error", err)
		old.scope.Restart()
		return
	}
	h.log.Info("plugin moved to a new process", "entry", en.id, "reason", why, "pid", ld.proc.Pid())
	h.retire(old)
}

// retire stops a process that left its slot, once its calls are done:
// they are the scope's own calls, which may last as long as any call may.
func (h *Host) retire(old *load) {
	old.stopping.Store(true)
	old.drain(context.Background(), h.callTimeout())
	h.stopProcess(old.proc)
}

// stopProcess stops a process the host is done with, bounded by the
// composition's stop timeout.
func (h *Host) stopProcess(p *pluginproc.Process) {
	ctx, cancel := context.WithTimeout(context.Background(), h.stopTimeout())
	defer cancel()
	_ = p.Stop(ctx)
}

// crashedDuringApply treats a process that died while applying as a crash:
// once its scope has failed, it is restarted after the backoff (or stays
// failed in a crash loop).
func (h *Host) crashedDuringApply(ld *load, ctx context.Context, applyErr error) error {
	select {
	case <-ld.proc.Exited():
	case <-time.After(100 * time.Millisecond):
		return applyErr // alive: Apply itself failed, which is final
	}
	if ctx.Err() != nil || h.closing.Load() {
		return applyErr
	}
	ld.stopping.Store(true) // watchExit must not count it twice
	backoff, loop := ld.en.recordCrash(time.Now(), "its process exited while applying its config: "+applyErr.Error())
	h.log.Error("plugin crashed while applying", "entry", ld.en.id, "binary", ld.proc.Binary(), "backoff", backoff, "crash_loop", loop)
	if loop {
		return fmt.Errorf("crash loop: it crashed %d times within %v, the last time while applying; fix it, then run `dsh reload %s`", crashLimit, crashWindow, ld.en.id)
	}
	s := ld.scope
	go func() {
		for {
			ch := h.reg.Changed()
			switch s.State() {
			case registry.Failed:
				s.Restart()
				return
			case registry.Disposed:
				return
			}
			<-ch
		}
	}()
	return fmt.Errorf("crashed while applying (restarting in %v): %w", backoff, applyErr)
}

// bgAdd counts a restart or swap about to run, unless the host is closing
// (Close waits for those it counted).
func (h *Host) bgAdd() bool {
	h.bgMu.Lock()
	defer h.bgMu.Unlock()
	if h.bgClosed {
		return false
	}
	h.bg.Add(1)
	return true
}

func (h *Host) drainTimeout() time.Duration { return 10 * time.Second }

// The pulse: every pingInterval the host asks each serving process for its
// health, each ask bounded by pingTimeout. A process that misses
// pulseMisses in a row is unhealthy (dsh status says so) and is killed; its
// exit is then a crash like any other (backoff, crash loop), and the calls
// it held get an error that says it stopped answering.
const pulseMisses = 3

func (h *Host) pulse(ld *load) {
	t := time.NewTicker(h.pingInterval())
	defer t.Stop()
	for {
		select {
		case <-ld.proc.Exited():
			return
		case <-t.C:
		}
		if ld.stopping.Load() || h.closing.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.pingTimeout())
		_, err := ld.proc.Lifecycle().Health(ctx)
		cancel()
		if ld.stopping.Load() {
			return
		}
		if err == nil {
			ld.slot.answered()
			continue
		}
		n := ld.slot.missed()
		h.log.Warn("plugin missed a health check", "entry", ld.en.id, "pid", ld.proc.Pid(), "in_a_row", n, "error", err)
		if n >= pulseMisses {
			h.log.Error("plugin stopped answering its health checks; killing it", "entry", ld.en.id, "binary", ld.proc.Binary(), "pid", ld.proc.Pid())
			ld.unresponsive.Store(true)
			ld.proc.Kill()
			return
		}
	}
}
