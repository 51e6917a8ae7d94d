package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"google.golang.org/grpc/metadata"

	"github.com/dshrun/dsh/host/consent"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// The host stamps identity. Each tool call gets a call id that stands for
// the agent (owner) it serves; the host puts it in the call's metadata and
// remembers which plugins the call has reached. A plugin passes it on with
// the requests it makes while serving the call (the SDK does), and the host
// honours it only from a plugin the call reached, so no plugin can name an
// owner, or borrow another call's, by itself. Core services take the owner
// from the call id alone; a request that serves no call is the plugin's own.

type calls struct {
	mu sync.Mutex
	m  map[string]*callInfo
}

type callInfo struct {
	owner   string
	reached map[string]bool // entry ids of the plugins the call reached
	asker   consent.Asker   // asks the user behind the call; nil: nobody can
}

// begin registers a call for owner that reaches plugin first; end forgets
// it.
func (cs *calls) begin(owner, plugin string) (id string, end func()) {
	return cs.beginAsking(owner, plugin, nil)
}

// beginAsking is begin for a call whose user asker asks (nil: nobody
// can).
func (cs *calls) beginAsking(owner, plugin string, asker consent.Asker) (id string, end func()) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id = hex.EncodeToString(b[:])
	cs.mu.Lock()
	if cs.m == nil {
		cs.m = map[string]*callInfo{}
	}
	cs.m[id] = &callInfo{owner: owner, reached: map[string]bool{plugin: true}, asker: asker}
	cs.mu.Unlock()
	return id, func() {
		cs.mu.Lock()
		delete(cs.m, id)
		cs.mu.Unlock()
	}
}

// serving is call id as a request from caller serves it: its owner and
// who can ask its user, when the call reached caller.
func (cs *calls) serving(id, caller string) (consent.Call, bool) {
	if id == "" {
		return consent.Call{}, false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.m[id]
	if !ok || !c.reached[caller] {
		return consent.Call{}, false
	}
	return consent.Call{Served: seam.Served{Owner: c.owner, Call: id}, Asker: c.asker}, true
}

// reach records that call id, honoured from caller, goes on to plugin.
func (cs *calls) reach(id, plugin string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m[id]; ok {
		c.reached[plugin] = true
	}
}

// pass records that call id, when it reached from, goes on to plugin; false
// (and nothing recorded) when the call did not reach from.
func (cs *calls) pass(id, from, plugin string) bool {
	if id == "" {
		return false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.m[id]
	if !ok || !c.reached[from] {
		return false
	}
	c.reached[plugin] = true
	return true
}

// callOf is the call id in a request's incoming metadata.
func callOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return first(md.Get(sdk.MetaCall))
}

// servingFor finds, for a request arriving from caller, the call it
// serves and the owner that call stands for, in one look at the calls; ok
// is false for a request that serves no call (or one that caller was never
// reached by).
func (h *Host) servingFor(caller string) seam.Serving {
	return func(ctx context.Context) (seam.Served, bool) {
		c, ok := h.calls.serving(callOf(ctx), caller)
		return c.Served, ok
	}
}
