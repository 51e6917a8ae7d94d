package host

import (
	"context"

	"github.com/dshrun/dsh/sdk/modeltext"
)

// CallTool makes call: its tool for its owner (the agent), ctx.approval
// asking the call's user through its Asker. It fails with an
// *ArgumentsError for an unknown tool or arguments that do not fit its
// schema, an *UnavailableError while no process can serve the tool, and a
// *CallError when the tool did not answer; each one's Error is in words a
// model may read.
//
// Once the host stops (StopCalls) a call is refused with RefusedText, and
// a call it stopped is answered with StoppedText ahead of what the tool
// said, if it could say anything.
//
// The result's texts are what a model may read, whoever wrote them (the
// tool, a hook's reason, context or feedback, a refusal): each is cleaned
// by modeltext, so no escape sequence (an OSC 52 clipboard write, colours,
// a window title) reaches the caller. Every front end gets them so.
func (h *Host) CallTool(ctx context.Context, call ToolCall) (*ToolResult, error) {
	res, err := h.callInFlight(ctx, &call)
	if res != nil {
		res.Text = cleanText(res.Text)
		for i, fb := range res.Feedback {
			res.Feedback[i] = cleanText(fb)
		}
	}
	return res, err
}

// cleanText is s as a model may read it.
func cleanText(s string) string {
	b, _ := modeltext.Clean([]byte(s))
	return string(b)
}
