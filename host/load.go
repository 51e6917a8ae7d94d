package host

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/registry"
	"github.com/dshrun/dsh/sdk/pluginv1"
)

// load is one loaded life of an entry: its process, its host server and the
// keys it has called. A reload makes a new load.
type load struct {
	en      *entry
	desc    *pluginv1.Description // what this process described
	scope   *registry.Scope
	proc    *pluginproc.Process
	started time.Time

	stopping atomic.Bool  // the host is stopping it: an exit is no crash
	inflight atomic.Int64 // calls relayed to this process, not yet answered

	mu      sync.Mutex
	touched map[string]bool
}

var _ caller = (*load)(nil)

func (ld *load) callerID() string    { return ld.en.id }
func (ld *load) callerLabel() string { return ld.en.label() }

func (ld *load) addEffect(label string, dispose func(context.Context) error) error {
	_, err := ld.scope.Effect(label, dispose)
	return err
}

func (ld *load) pluginConn() grpc.ClientConnInterface { return ld.proc.Conn() }

func (ld *load) declares(key string) bool {
	for _, in := range ld.desc.Inject {
		if in.Key == key {
			return true
		}
	}
	return false
}

func (ld *load) touch(key string) {
	ld.mu.Lock()
	seen := ld.touched[key]
	ld.touched[key] = true
	ld.mu.Unlock()
	if seen {
		return
	}
	h, id := ld.en.h, ld.en.e.ID
	// An effect of the caller's scope: when the caller goes away, the
	// provider drops what the caller registered with it. A scope that is
	// already unloading admits no effect; its calls still go through.
	_, _ = ld.scope.Effect("caller of "+key, func(ctx context.Context) error {
		ep, ok := h.endpoint(key)
		if !ok {
			return nil
		}
		if _, err := ep.lc.Release(ctx, &pluginv1.ReleaseRequest{Caller: id}); err != nil {
			if status.Code(err) == codes.Unavailable {
				return nil // the provider is gone, and what it held with it
			}
			return fmt.Errorf("release %q at %q: %w", id, ep.id, err)
		}
		return nil
	})
}

// applyEntry is the registry's Apply for an entry: take (or start) the
// process, serve the host to it, send Apply, then provide its keys.
func (h *Host) applyEntry(en *entry) func(context.Context, *registry.Scope) error {
	return h.applyEntryAs(en, en.desc, false, false, nil)
}

// applyEntryAs is applyEntry; with replace, the keys are taken over from
// their current provider once this scope is active (make-before-break),
// keeping its dependents running when keep is set.
//
// With to, the process is started from to's binary with to's config (an
// entry moving to another binary); otherwise from the entry's own.
func (h *Host) applyEntryAs(en *entry, desc *pluginv1.Description, replace, keep bool, to *procTarget) func(context.Context, *registry.Scope) error {
	return func(ctx context.Context, s *registry.Scope) error {
		if err := en.waitBackoff(ctx); err != nil {
			return err
		}
		proc := en.takeSpare()
		if proc == nil {
			var err error
			if to != nil {
				proc, err = en.startBinary(ctx, to.binary, to.sha256)
			} else {
				proc, err = en.start(ctx)
			}
			if err != nil {
				return err
			}
		}
		// First effect, so it is disposed last: the process outlives every
		// registration it made.
		ld := &load{en: en, desc: desc, scope: s, proc: proc, touched: map[string]bool{}, started: time.Now()}
		if _, err := s.Effect("process "+proc.Binary(), func(ctx context.Context) error {
			ld.stopping.Store(true)
			en.clearCurrent(ld)
			ld.drain(ctx, h.drainTimeout())
			sctx, cancel := context.WithTimeout(ctx, h.stopTimeout())
			defer cancel()
			return proc.Stop(sctx)
		}); err != nil {
			_ = proc.Stop(context.WithoutCancel(ctx))
			return err
		}
		// Processes the plugin owns (spawned without naming another owner)
		// go with it; disposed before the plugin process itself stops.
		if _, err := s.Effect("processes of "+en.e.ID, func(ctx context.Context) error {
			return h.sub.ReleaseOwner(ctx, en.e.ID)
		}); err != nil {
			return err
		}
		en.setCurrent(ld)
		dir, err := h.rt.pluginDir(en.e.ID)
		if err != nil {
			return err
		}
		brokerID := proc.Broker().NextId()
		go proc.Broker().AcceptAndServe(brokerID, func(opts []grpc.ServerOption) *grpc.Server {
			return h.newHostServer(ld, opts...)
		})
		resp, err := proc.Apply(ctx, &pluginv1.ApplyRequest{
			Id:           en.e.ID,
			ConfigJson:   to.configOr(en),
			HostBrokerId: brokerID,
			RuntimeDir:   dir,
		})
		if err != nil {
			return h.crashedDuringApply(ld, ctx, err)
		}
		for _, p := range desc.Provides {
			ep := &endpoint{
				id:       en.e.ID,
				conn:     proc.Conn(),
				lc:       proc.Lifecycle(),
				services: map[string]bool{},
				load:     ld,
			}
			for _, svc := range p.GrpcServices {
				ep.services[svc] = true
			}
			if f := resp.Facts[p.Key]; f != nil {
				ep.facts = f.Values
			}
			var err error
			if replace {
				_, err = s.Replace(p.Key, ep, keep)
			} else {
				_, err = s.Provide(p.Key, ep)
			}
			if err != nil {
				return err
			}
		}
		go h.watchExit(ld)
		return nil
	}
}
