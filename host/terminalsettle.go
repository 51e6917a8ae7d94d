package host

import (
	"context"

	"github.com/dshrun/dsh/core/sandbox"
)

// settleTerminal is ctx.terminals' settle of a confined session's watch:
// the runner's, as the backend's Wrap made it.
func (h *Host) settleTerminal(ctx context.Context, token string, keep bool) (string, []*sandbox.Undone, error) {
	st, err := h.runner.Settle(ctx, &sandbox.SettleRequest{Settle: token, Keep: keep})
	if err != nil {
		return "", nil, err
	}
	return st.GetSettle(), st.GetUndone(), nil
}
