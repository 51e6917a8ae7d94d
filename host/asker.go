package host

import (
	"context"

	"github.com/dshrun/dsh/host/consent"
)

// The user behind a tool call is asked through the front end that made
// it: its Asker comes with the call (ToolCall) and stays with the call id,
// so ctx.approval asks only the user of the call a request serves, found
// with its owner in one look at the calls.

// approvalServing finds, for requests arriving from caller, the call they
// serve and who can ask its user; ok is false for a request that serves
// no call (or one that caller was never reached by).
func (h *Host) approvalServing(caller string) func(context.Context) (consent.Call, bool) {
	return func(ctx context.Context) (consent.Call, bool) {
		return h.calls.serving(callOf(ctx), caller)
	}
}
