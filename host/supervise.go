package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/registry"
	"github.com/dshrun/dsh/sdk/pluginv1"
)

// Supervision: a plugin process that exits on its own is a crash. Its
// scope restarts (its services are withdrawn and its dependents go back to
// pending, with the reason), after an exponential backoff; too many crashes
// in a window make it FAILED ("crash loop"), which only an explicit reload
// leaves.

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
}

// recordCrash notes a crash and returns the backoff before the next start
// and whether the plugin is now in a crash loop.
func (en *entry) recordCrash(now time.Time) (time.Duration, bool) {
	en.mu.Lock()
	defer en.mu.Unlock()
	sup := &en.sup
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
	en.sup.crashes, en.sup.loop, en.sup.nextStart = nil, false, time.Time{}
}

// waitBackoff holds a restart until the backoff has passed, and refuses to
// start a plugin in a crash loop.
func (en *entry) waitBackoff(ctx context.Context) error {
	en.mu.Lock()
	loop, next, n := en.sup.loop, en.sup.nextStart, len(en.sup.crashes)
	en.mu.Unlock()
	if loop {
		return fmt.Errorf("crash loop: %d crashes within %v; fix it, then run `dsh reload %s`", n, crashWindow, en.e.ID)
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

// watchExit turns an unexpected exit into a supervised restart.
func (h *Host) watchExit(ld *load) {
	<-ld.proc.Exited()
	if ld.stopping.Load() || h.closing.Load() {
		return
	}
	en := ld.en
	backoff, loop := en.recordCrash(time.Now())
	if loop {
		h.log.Error("plugin crashed again: crash loop, not restarting", "id", en.e.ID, "binary", en.binary, "pid", ld.proc.Pid())
	} else {
		h.log.Error("plugin crashed; restarting", "id", en.e.ID, "binary", en.binary, "pid", ld.proc.Pid(), "backoff", backoff)
	}
	ld.scope.Restart()
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
	backoff, loop := ld.en.recordCrash(time.Now())
	h.log.Error("plugin crashed while applying", "id", ld.en.e.ID, "binary", ld.en.binary, "backoff", backoff, "crash_loop", loop)
	if loop {
		return fmt.Errorf("crash loop: it crashed %d times within %v, the last time while applying; fix it, then run `dsh reload %s`", crashLimit, crashWindow, ld.en.e.ID)
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

// drain waits (bounded) for the calls in flight on this load to finish.
func (ld *load) drain(ctx context.Context, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for ld.inflight.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *Host) drainTimeout() time.Duration { return 10 * time.Second }

// ErrUnknownEntry is returned for an id the composition does not have.
var ErrUnknownEntry = errors.New("no such entry")

// Reload restarts one entry with a new process. A provider is replaced
// make-before-break: the new process starts, applies and is active before
// it takes the keys over; calls in flight on the old one finish (within a
// drain deadline) before it stops. If the new one fails, the old one keeps
// serving and the error says why. Consumers keep running when the new
// description matches the old and the provider keeps no caller state;
// otherwise they reload against the new one. Reload also takes an entry out
// of a crash loop.
func (h *Host) Reload(ctx context.Context, id string) error {
	h.mu.Lock()
	en, ok := h.byID[id]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("reload %q: %w", id, ErrUnknownEntry)
	}
	return h.reload(ctx, en, nil)
}

// retarget is what an edited composition changes of an entry's binary: its
// name, path or sha256.
type retarget struct {
	comp   *composition.Composition
	e      composition.Entry
	binary string
}

// reload is Reload, onto another binary when to is set. That binary must
// provide and inject the same keys and accept the entry's config; until
// its process is active the entry keeps its old binary (and so does a
// restart after a crash), and if it fails the old process keeps serving.
func (h *Host) reload(ctx context.Context, en *entry, to *retarget) error {
	id := en.e.ID
	en.resetCrashes()
	old := en.getScope()
	if old == nil {
		return fmt.Errorf("reload %q: not loaded", id)
	}
	en.mu.Lock()
	oldBin, oldE, oldConfig := en.binary, en.e, en.config
	en.mu.Unlock()
	bin, sha := oldBin, oldE.SHA256
	if to != nil {
		bin, sha = to.binary, to.e.SHA256
	}
	plain := len(en.desc.Provides) == 0 || old.State() != registry.Active
	if plain && to == nil {
		// Nothing to keep serving: a plain restart.
		old.Restart()
		return h.settle(ctx, old, id)
	}
	proc, err := en.startBinary(ctx, bin, sha)
	if err != nil {
		return fmt.Errorf("reload %q: %w", id, err)
	}
	desc := proc.Description()
	if !sameKeys(en.desc, desc) {
		_ = proc.Stop(ctx)
		return fmt.Errorf("reload %q: %s provides or injects other keys than %s (provides %s, injects %s; was %s, %s); give it a new id instead",
			id, bin, oldBin, provideKeys(desc), injectKeys(desc), provideKeys(en.desc), injectKeys(en.desc))
	}
	if to != nil {
		cfg, err := effectiveConfig(to.comp, to.e, desc)
		if err != nil {
			_ = proc.Stop(ctx)
			return err
		}
		en.mu.Lock()
		en.binary, en.e, en.config = to.binary, to.e, cfg
		en.mu.Unlock()
	}
	restore := func() {
		if to != nil {
			en.mu.Lock()
			en.binary, en.e, en.config = oldBin, oldE, oldConfig
			en.mu.Unlock()
		}
	}
	if plain {
		// A consumer moving to another binary: restart it on the new
		// process; if that fails, back onto the old binary.
		en.mu.Lock()
		en.spare = proc
		en.mu.Unlock()
		old.Restart()
		if err := h.settle(ctx, old, id); err != nil {
			restore()
			old.Restart()
			_ = h.settle(ctx, old, id)
			return err
		}
		en.setDesc(desc)
		return nil
	}
	keep := proto.Equal(en.desc, desc)
	for _, p := range desc.Provides {
		keep = keep && !p.CallerState
	}
	en.mu.Lock()
	en.spare = proc
	en.gen++
	gen := en.gen
	en.mu.Unlock()
	ns, err := h.reg.Add(registry.Spec{
		ID:     fmt.Sprintf("%s#%d", id, gen),
		Label:  en.label(),
		Inject: en.deps(),
		Apply:  h.applyEntryAs(en, desc, true, keep),
	})
	if err != nil {
		if p := en.takeSpare(); p != nil {
			_ = p.Stop(ctx)
		}
		restore()
		return fmt.Errorf("reload %q: %w", id, err)
	}
	if err := h.settle(ctx, ns, id); err != nil {
		_ = ns.Dispose(context.WithoutCancel(ctx))
		restore()
		return err
	}
	en.setScope(ns)
	en.setDesc(desc)
	h.log.Info("plugin reloaded", "id", id, "binary", en.binary, "consumers_kept", keep)
	return old.Dispose(context.WithoutCancel(ctx))
}

// settle waits until s is active or failed.
func (h *Host) settle(ctx context.Context, s *registry.Scope, id string) error {
	if err := h.reg.Settled(ctx); err != nil {
		return fmt.Errorf("reload %q: %w", id, err)
	}
	if st := s.State(); st != registry.Active {
		return fmt.Errorf("reload %q: %s: %s", id, st, s.Reason())
	}
	return nil
}

func provideKeys(d *pluginv1.Description) string {
	var keys []string
	for _, p := range d.Provides {
		keys = append(keys, p.Key)
	}
	return "[" + strings.Join(keys, " ") + "]"
}

func injectKeys(d *pluginv1.Description) string {
	var keys []string
	for _, in := range d.Inject {
		keys = append(keys, in.Key)
	}
	return "[" + strings.Join(keys, " ") + "]"
}

func sameKeys(a, b *pluginv1.Description) bool {
	if len(a.Provides) != len(b.Provides) || len(a.Inject) != len(b.Inject) {
		return false
	}
	for i := range a.Provides {
		if a.Provides[i].Key != b.Provides[i].Key {
			return false
		}
	}
	for i := range a.Inject {
		if a.Inject[i].Key != b.Inject[i].Key || a.Inject[i].Optional != b.Inject[i].Optional {
			return false
		}
	}
	return true
}
