package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/registry"
	"github.com/dshrun/dsh/sdk"
)

// load is one process of an entry: its process, its host server and its
// calls in flight. A scope's slot holds its current load; a crash or a swap
// makes a new load in the same slot, a reload a new scope.
type load struct {
	en      *entry
	desc    *lifecycle.Description // what this process described
	target  procTarget             // what it was started from; a restart in place starts the same
	scope   *registry.Scope
	slot    *slot
	proc    *pluginproc.Process
	started time.Time

	stopping atomic.Bool // the host is stopping it: an exit is no crash
	inflight inflight    // calls relayed to this process, not yet answered
	// unresponsive is set when the pulse killed it for missing its health
	// checks, so calls cut by that kill can say why.
	unresponsive atomic.Bool
	// limits are an executor's, as its process said them once applied
	// (ctx.shell's Limits); nil for a plugin that provides no executor.
	// Set before the load is published, never changed.
	limits *shell.Limits
}

var _ caller = (*load)(nil)

func (ld *load) callerID() string    { return ld.en.id }
func (ld *load) callerLabel() string { return ld.en.label() }
func (ld *load) self() *load         { return ld }

func (ld *load) addEffect(label string, dispose func(context.Context) error) error {
	_, err := ld.scope.Effect(label, dispose)
	return err
}

func (ld *load) declares(key string) bool {
	for _, in := range ld.desc.Inject {
		if in.Key == key {
			return true
		}
	}
	return false
}

func (ld *load) touch(key string) {
	if !ld.slot.touch(key) {
		return
	}
	h, id := ld.en.h, ld.en.id
	// An effect of the caller's scope: when the caller goes away, the
	// provider drops what the caller registered with it. A scope that is
	// already unloading admits no effect; its calls still go through.
	en, scope := ld.en, ld.scope
	_, _ = ld.scope.Effect("caller of "+key, func(ctx context.Context) error {
		if cur := en.getScope(); cur != nil && cur != scope {
			// A reload moved the entry to a new scope first (make-before-
			// break): the provider knows both by the same caller id, and
			// what it holds for that id is the new scope's now.
			return nil
		}
		ep, ok := h.endpoint(key)
		if !ok {
			return nil
		}
		wait := h.restartWait()
		if h.closing.Load() {
			// The provider goes too, and what it holds with it: a restart
			// under way (one the closing host will not finish) is not
			// waited for.
			wait = 0
		}
		target, err := ep.slot.get(ctx, ep.id, wait)
		if err != nil {
			return nil // the provider is gone, and what it held with it
		}
		rctx, cancel := context.WithTimeout(ctx, controlTimeout)
		defer cancel()
		if err := target.proc.Lifecycle().Release(rctx, id); err != nil {
			if errors.Is(err, sdk.ErrProviderGone) {
				return nil // the provider is gone, and what it held with it
			}
			return fmt.Errorf("release %q at %q: %w", id, ep.id, err)
		}
		return nil
	})
}

// controlTimeout bounds the host's own calls to a plugin (apply, release).
const controlTimeout = 10 * time.Second

// applyProcess makes proc a load of scope s in slot sl: the host server it
// talks to, then Apply. On error the load is returned too (the process
// may have crashed), not yet in the slot.
func (h *Host) applyProcess(ctx context.Context, en *entry, s *registry.Scope, sl *slot, desc *lifecycle.Description, proc *pluginproc.Process, target procTarget) (*load, *lifecycle.ApplyResponse, error) {
	ld := &load{en: en, desc: desc, target: target, scope: s, slot: sl, proc: proc, started: time.Now()}
	dir, err := h.rt.pluginDir(en.id)
	if err != nil {
		return ld, nil, err
	}
	brokerID := proc.Broker().NextId()
	go proc.Broker().AcceptAndServe(brokerID, func(opts []grpc.ServerOption) *grpc.Server {
		return h.newHostServer(ld, append(opts, sdk.ServerOptions()...)...)
	})
	actx, cancel := context.WithTimeout(ctx, max(controlTimeout, h.startTimeout()))
	defer cancel()
	resp, err := proc.Apply(actx, &lifecycle.ApplyRequest{
		Id:           en.id,
		ConfigJson:   target.config,
		HostBrokerId: brokerID,
		RuntimeDir:   dir,
	})
	if err == nil && lifecycle.Provides(desc, shell.Key) {
		ld.limits = h.executorLimits(actx, en, proc)
	}
	return ld, resp, err
}

// executorLimits are the limits an executor's process applies, asked once
// per process: the host bounds its calls by them and reads no plugin's
// config. One that cannot say is assumed to apply ctx.shell's defaults.
func (h *Host) executorLimits(ctx context.Context, en *entry, proc *pluginproc.Process) *shell.Limits {
	ctx = metadata.AppendToOutgoingContext(ctx, sdk.MetaCaller, "host")
	lim, err := shell.NewClient(proc.Conn(), "").Limits(ctx)
	if err != nil {
		h.log.Warn("the executor did not say its limits: calls are bounded by the defaults", "entry", en.id, "binary", proc.Binary(), "error", err)
		return shell.DefaultLimits()
	}
	return lim
}

// inflight counts a process's calls in flight; drain waits for none.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

func (f *inflight) begin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
}

func (f *inflight) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		close(f.idle)
		f.idle = nil
	}
}

// wait returns a channel closed once no call is in flight.
func (f *inflight) wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return closedChan
	}
	return f.idle
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// drain waits (bounded) for the calls in flight on this load to finish.
func (ld *load) drain(ctx context.Context, bound time.Duration) {
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-ld.inflight.wait():
	case <-t.C:
	case <-ctx.Done():
	}
}
