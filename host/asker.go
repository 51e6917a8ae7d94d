package host

import (
	"context"

	"github.com/dshrun/dsh/host/consent"
)

// The user behind a tool call is asked through the front end that made
// it: its Asker comes in the CallTool context (consent.WithAsker) and
// stays with the call id, so ctx.approval asks only the user of the call
// a request serves, found the way its owner is.

// keepAsker keeps ctx's Asker with call id, for as long as the call runs.
func (cs *calls) keepAsker(ctx context.Context, id string) {
	a := consent.AskerFrom(ctx)
	if a == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m[id]; ok {
		c.asker = a
	}
}

// askerFor returns, for requests arriving from caller, the Asker of the
// call they serve; nil for a request that serves no call, one that caller
// was never reached by, or a call no front end can ask about.
func (h *Host) askerFor(caller string) func(context.Context) consent.Asker {
	return func(ctx context.Context) consent.Asker {
		id := callOf(ctx)
		h.calls.mu.Lock()
		defer h.calls.mu.Unlock()
		c, ok := h.calls.m[id]
		if id == "" || !ok || !c.reached[caller] {
			return nil
		}
		return c.asker
	}
}
