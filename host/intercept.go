package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/metadata"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/host/consent"
	"github.com/dshrun/dsh/host/toolset"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// Tool calls pass the interceptors plugins set on them (ctx.tools
// Intercept): before a call every interceptor that covers the tool answers
// at once, each within its timeout, and the strongest verdict wins (deny
// beats ask beats allow; an interceptor that fails or does not answer in
// time denies, so the call fails closed); after it they see the result and
// may add feedback (one that fails is logged). Calls of tools no
// interceptor covers cost nothing more.

// intercepted is what the interceptors decided before a call.
type intercepted struct {
	args     json.RawMessage // what to call the tool with
	refused  *ToolResult     // set when the call must not run
	feedback []string        // context for the model, after the result
}

// Notify passes on messages for the user behind a call (interceptors'
// system messages); an MCP front end sends them as log messages. A call
// without one has them logged.
type Notify func(message string)

func (h *Host) notify(n Notify, plugin string, msgs []string) {
	for _, m := range msgs {
		if strings.TrimSpace(m) == "" {
			continue
		}
		if n != nil {
			n(m)
		} else {
			h.log.Info("message from a tool interceptor", "plugin", plugin, "message", m)
		}
	}
}

// refusal is a call that does not run, as its result; a hook's long
// reason is cleaned then cut (the model reads it, and a hook's stderr can
// be anything: escapes must not take the room of words).
func refusal(text string) *ToolResult {
	text = cleanText(text)
	if r := []rune(text); len(r) > maxRefusal {
		text = string(r[:maxRefusal]) + fmt.Sprintf("… (%d more characters)", len(r)-maxRefusal)
	}
	return &ToolResult{Text: "[" + text + "]", IsError: true}
}

// stopped says an interceptor stopped the call, and why.
func stopped(reason string) string {
	if reason == "" {
		reason = "a hook stopped the call"
	}
	return "stopped by hook: " + reason
}

// maxRefusal bounds the characters of a refusal.
const maxRefusal = 8000

// interceptCall reaches interceptor ic's plugin for a call: its process,
// and ctx carrying the call id (so what the interceptor does meanwhile acts
// for the call's owner).
func (h *Host) interceptCall(ctx context.Context, ic *toolset.Interceptor[toolSlot], callID string) (*tools.InterceptorClient, *load, context.Context, error) {
	ld, err := ic.Slot.get(ctx, ic.Plugin, h.restartWait())
	if err != nil {
		return nil, nil, nil, err
	}
	h.calls.reach(callID, ic.Plugin)
	ctx = metadata.AppendToOutgoingContext(ctx, sdk.MetaCall, callID, sdk.MetaCaller, "host")
	return tools.NewInterceptorClient(ld.proc.Conn()), ld, ctx, nil
}

// before asks the interceptors covering t whether and how its call runs.
func (h *Host) before(ctx context.Context, tc *ToolCall, callID string, t *toolset.Tool[toolSlot], args json.RawMessage) intercepted {
	owner := tc.Owner
	ics := h.tools.Interceptors(t.Spec.Name, false)
	if len(ics) == 0 {
		return intercepted{args: args}
	}
	type answer struct {
		d   *tools.BeforeDecision
		err error
	}
	answers := make([]answer, len(ics))
	var wg sync.WaitGroup
	for i, ic := range ics {
		wg.Go(func() {
			ictx, cancel := context.WithTimeout(ctx, ic.Timeout)
			defer cancel()
			c, ld, ictx, err := h.interceptCall(ictx, ic, callID)
			if err != nil {
				answers[i].err = err
				return
			}
			ld.inflight.begin()
			defer ld.inflight.end()
			call := &tools.InterceptedCall{Tool: t.Spec.Name, Alias: ic.Alias(t.Spec.Name), Arguments: args, Owner: owner, CallId: callID}
			answers[i].d, answers[i].err = c.Before(ictx, &tools.BeforeCall{Call: call})
			if answers[i].err != nil && ictx.Err() != nil && ctx.Err() == nil {
				answers[i].err = fmt.Errorf("no answer within %v", ic.Timeout)
			}
		})
	}
	wg.Wait()

	out := intercepted{args: args}
	verdict, reasons := tools.VerdictNone, map[tools.Verdict][]string{}
	var replaced json.RawMessage
	var replacers []string
	for i, a := range answers {
		ic := ics[i]
		if a.err != nil {
			h.log.Warn("a tool interceptor failed: the call is denied", "plugin", ic.Plugin, "tool", t.Spec.Name, "owner", owner, "error", a.err)
			verdict = tools.VerdictDeny
			reasons[tools.VerdictDeny] = append(reasons[tools.VerdictDeny], fmt.Sprintf("the hooks of plugin %s could not decide (%v), so the call is refused", ic.Label, a.err))
			continue
		}
		d := a.d
		h.notify(tc.Notify, ic.Plugin, d.SystemMessages)
		if d.AdditionalContext != "" {
			out.feedback = append(out.feedback, d.AdditionalContext)
		}
		if d.Stop {
			out.refused = refusal(stopped(d.StopReason))
		}
		if d.Verdict > verdict {
			verdict = d.Verdict
		}
		if d.Reason != "" {
			reasons[d.Verdict] = append(reasons[d.Verdict], d.Reason)
		}
		if len(d.UpdatedArguments) > 0 {
			var c bytes.Buffer
			if err := json.Compact(&c, d.UpdatedArguments); err != nil {
				verdict = tools.VerdictDeny
				reasons[tools.VerdictDeny] = append(reasons[tools.VerdictDeny], fmt.Sprintf("a hook of plugin %s replaced the arguments with something that is not JSON", ic.Label))
				continue
			}
			if replaced != nil && !bytes.Equal(replaced, c.Bytes()) {
				verdict = tools.VerdictDeny
				reasons[tools.VerdictDeny] = append(reasons[tools.VerdictDeny], "two hooks replaced the arguments differently ("+strings.Join(append(replacers, ic.Label), ", ")+")")
			}
			replaced = c.Bytes()
			replacers = append(replacers, ic.Label)
		}
	}
	if out.refused != nil {
		return out
	}
	if verdict == tools.VerdictDeny {
		out.refused = refusal("denied by hook: " + strings.Join(reasons[tools.VerdictDeny], "; "))
		return out
	}
	if replaced != nil {
		if msg := argumentsFit(t, replaced); msg != "" {
			out.refused = refusal("denied: a hook replaced the arguments with ones the tool does not take (" + msg + ")")
			return out
		}
		out.args = replaced
	}
	if verdict == tools.VerdictAsk {
		reason := strings.Join(reasons[tools.VerdictAsk], "; ")
		d, err := h.askHooks(ctx, consent.Call{Served: seam.Served{Owner: owner, Call: callID}, Asker: tc.Asker}, t.Spec.Name, out.args, reason)
		if err != nil || !d.Approved {
			why := d.GetReason()
			if err != nil {
				why = err.Error()
			}
			out.refused = refusal("denied by hook: " + reason + " — the user's approval was needed: " + why)
		}
	}
	return out
}

// askHooks puts a hook's question about call to ctx.approval: the
// composition's approval rules, then the user behind the call (its front
// end's Asker), failing closed.
func (h *Host) askHooks(ctx context.Context, call consent.Call, tool string, args json.RawMessage, reason string) (*approval.Decision, error) {
	svc := &consent.Service{
		Policy:  h.approval,
		Caller:  "(host)",
		Serving: func(context.Context) (consent.Call, bool) { return call, true },
	}
	return svc.Approve(ctx, &approval.Request{Kind: "hook_ask", Owner: call.Owner, Tool: tool, Command: commandOf(args), Reason: reason})
}

// commandOf is what an approval rule matches for a call: its command
// argument when it has one, else its arguments as JSON.
func commandOf(args json.RawMessage) string {
	var a struct {
		Command *string `json:"command"`
	}
	if json.Unmarshal(args, &a) == nil && a.Command != nil {
		return *a.Command
	}
	return string(args)
}

// argumentsFit checks args against t's schema: "" when they fit.
func argumentsFit(t *toolset.Tool[toolSlot], args json.RawMessage) string {
	vs, err := t.Schema.Validate(args)
	if err != nil {
		return err.Error()
	}
	var msgs []string
	for _, v := range vs {
		msgs = append(msgs, v.Where("arguments")+": "+v.Message)
	}
	return strings.Join(msgs, "; ")
}

// after shows the interceptors covering t the result of its call, and
// adds their feedback to it.
func (h *Host) after(ctx context.Context, tc *ToolCall, callID string, t *toolset.Tool[toolSlot], args json.RawMessage, res *ToolResult) {
	owner := tc.Owner
	ics := h.tools.Interceptors(t.Spec.Name, true)
	if len(ics) == 0 {
		return
	}
	result := &tools.CallResult{Text: res.Text, Structured: res.Structured, IsError: res.IsError}
	fbs := make([]*tools.AfterFeedback, len(ics))
	var wg sync.WaitGroup
	for i, ic := range ics {
		wg.Go(func() {
			ictx, cancel := context.WithTimeout(ctx, ic.Timeout)
			defer cancel()
			c, ld, ictx, err := h.interceptCall(ictx, ic, callID)
			if err == nil {
				ld.inflight.begin()
				call := &tools.InterceptedCall{Tool: t.Spec.Name, Alias: ic.Alias(t.Spec.Name), Arguments: args, Owner: owner, CallId: callID}
				fbs[i], err = c.After(ictx, &tools.AfterCall{Call: call, Result: result})
				ld.inflight.end()
			}
			if err != nil {
				h.log.Warn("a tool interceptor failed after the call", "plugin", ic.Plugin, "tool", t.Spec.Name, "owner", owner, "error", err)
			}
		})
	}
	wg.Wait()
	for i, fb := range fbs {
		if fb == nil {
			continue
		}
		h.notify(tc.Notify, ics[i].Plugin, fb.SystemMessages)
		if fb.Feedback != "" {
			res.Feedback = append(res.Feedback, fb.Feedback)
		}
		if fb.Stop {
			res.IsError = true
			res.Feedback = append(res.Feedback, "["+stopped(fb.StopReason)+"]")
		}
	}
}
