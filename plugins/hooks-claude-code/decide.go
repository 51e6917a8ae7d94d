package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/plugins/lib/hookbridge"
)

// payload is what a hook reads on stdin, as Claude Code writes it.
type payload struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	ToolResponse   json.RawMessage `json:"tool_response,omitempty"`
}

// dshBash is dsh's bash arguments; bashInput is Claude Code's Bash input.
type dshBash struct {
	Command         string `json:"command"`
	Description     string `json:"description,omitempty"`
	TimeoutMs       int64  `json:"timeoutMs,omitempty"`
	RunInBackground bool   `json:"run_in_background,omitempty"`
}

type bashInput struct {
	Command         string `json:"command"`
	Description     string `json:"description,omitempty"`
	Timeout         int64  `json:"timeout,omitempty"`
	RunInBackground bool   `json:"run_in_background,omitempty"`
}

// input is a call's arguments as its hooks read them (tool_input).
func input(c *tools.InterceptedCall) json.RawMessage {
	if c.Alias != "Bash" {
		return c.Arguments
	}
	var a dshBash
	_ = json.Unmarshal(c.Arguments, &a)
	in, _ := json.Marshal(bashInput{Command: a.Command, Description: a.Description, Timeout: a.TimeoutMs, RunInBackground: a.RunInBackground})
	return in
}

// updated is a call's arguments after a hook's updatedInput: its fields
// over the call's own (Bash's named as dsh's bash names them).
func updated(c *tools.InterceptedCall, in json.RawMessage) (json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return nil, err
	}
	up := map[string]json.RawMessage{}
	if err := json.Unmarshal(in, &up); err != nil {
		return nil, fmt.Errorf("updatedInput is not a JSON object")
	}
	for k, v := range up {
		if c.Alias == "Bash" {
			switch k {
			case "timeout":
				k = "timeoutMs"
			case "command", "description", "run_in_background":
			default:
				continue // not an argument of dsh's bash
			}
		}
		args[k] = v
	}
	return json.Marshal(args)
}

func (b *bridge) payload(ctx context.Context, event string, c *tools.InterceptedCall, response json.RawMessage) []byte {
	p, _ := json.Marshal(payload{
		SessionID:      b.ids.Session(c.Owner),
		Cwd:            b.runner.Cwd(ctx, c),
		PermissionMode: "default",
		HookEventName:  event,
		ToolName:       c.Alias,
		ToolInput:      input(c),
		ToolUseID:      b.ids.ToolUse(c.CallId),
		ToolResponse:   response,
	})
	return p
}

// output is what a hook may print on stdout (exit 0) as JSON.
type output struct {
	Continue       *bool  `json:"continue"`
	StopReason     string `json:"stopReason"`
	SuppressOutput bool   `json:"suppressOutput"`
	SystemMessage  string `json:"systemMessage"`
	Decision       string `json:"decision"`
	Reason         string `json:"reason"`
	Specific       *struct {
		HookEventName            string          `json:"hookEventName"`
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		AdditionalContext        string          `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

// parse reads a hook's stdout: JSON when it is a JSON object, else
// nothing (plain text on exit 0 decides nothing).
func parse(r hookbridge.Ran) (*output, error) {
	if r.StdoutCut {
		return nil, fmt.Errorf("its output is more than dsh reads of a hook (%d MiB, or the executor's spill limit), so it cannot be read", 16)
	}
	t := bytes.TrimSpace(r.Stdout)
	if len(t) == 0 || t[0] != '{' {
		return nil, nil
	}
	var o output
	if err := json.Unmarshal(t, &o); err != nil {
		return nil, fmt.Errorf("its output is not the JSON Claude Code reads: %v", err)
	}
	return &o, nil
}

func (b *bridge) Before(ctx context.Context, req *tools.BeforeCall) (*tools.BeforeDecision, error) {
	c := req.Call
	hs := b.set.Matching(hookbridge.PreToolUse, c.Alias)
	if len(hs) == 0 {
		return &tools.BeforeDecision{}, nil
	}
	p := b.payload(ctx, hookbridge.PreToolUse, c, nil)
	d := &tools.BeforeDecision{}
	var denies, asks, allows, contexts []string
	var replaced json.RawMessage
	for _, r := range b.runner.Run(ctx, c.Owner, hs, p) {
		switch {
		case r.Err == nil && !r.TimedOut && r.Signal == "" && r.ExitCode == 2:
			// Exit 2 blocks; stderr is the reason the model reads.
			reason := strings.TrimSpace(string(r.Stderr))
			if reason == "" {
				reason = "blocked by hook " + r.Command
			}
			denies = append(denies, reason)
			continue
		case r.Err != nil || r.TimedOut || r.Signal != "" || r.ExitCode != 0:
			b.nonBlocking(d, r.Failed())
			continue
		}
		o, err := parse(r)
		if err != nil {
			b.nonBlocking(d, fmt.Sprintf("hook %s (%s): %v", r.Command, r.Where, err))
			continue
		}
		if o == nil {
			continue
		}
		if o.SystemMessage != "" {
			d.SystemMessages = append(d.SystemMessages, o.SystemMessage)
		}
		if o.Continue != nil && !*o.Continue {
			d.Stop = true
			d.StopReason = join(d.StopReason, orElse(o.StopReason, "hook "+r.Command+" stopped the call"))
		}
		verdict, reason := o.Decision, o.Reason
		switch verdict {
		case "approve":
			verdict = "allow"
		case "block":
			verdict = "deny"
		}
		if s := o.Specific; s != nil {
			if s.PermissionDecision != "" {
				verdict, reason = s.PermissionDecision, s.PermissionDecisionReason
			}
			if s.AdditionalContext != "" {
				contexts = append(contexts, s.AdditionalContext)
			}
			if len(s.UpdatedInput) > 0 && string(s.UpdatedInput) != "null" {
				args, err := updated(c, s.UpdatedInput)
				switch {
				case err != nil:
					denies = append(denies, fmt.Sprintf("hook %s gave an updatedInput dsh cannot use: %v", r.Command, err))
				case replaced != nil && !bytes.Equal(replaced, args):
					denies = append(denies, "two hooks rewrote the call differently")
				default:
					replaced = args
				}
			}
		}
		switch verdict {
		case "":
		case "allow":
			allows = append(allows, reason)
		case "ask":
			asks = append(asks, orElse(reason, "hook "+r.Command+" asks for the user's approval"))
		case "deny":
			denies = append(denies, orElse(reason, "denied by hook "+r.Command))
		default:
			b.nonBlocking(d, fmt.Sprintf("hook %s (%s): permissionDecision %q is none of allow, deny, ask", r.Command, r.Where, verdict))
		}
	}
	switch {
	case len(denies) > 0:
		d.Verdict, d.Reason = tools.VerdictDeny, strings.Join(denies, "\n")
	case len(asks) > 0:
		d.Verdict, d.Reason = tools.VerdictAsk, strings.Join(asks, "\n")
	case len(allows) > 0:
		d.Verdict, d.Reason = tools.VerdictAllow, strings.Join(allows, "\n")
	}
	if d.Verdict != tools.VerdictDeny {
		d.UpdatedArguments = replaced
	}
	if len(contexts) > 0 {
		d.AdditionalContext = "PreToolUse hook context:\n" + strings.Join(contexts, "\n")
	}
	return d, nil
}

// nonBlocking records a hook that failed without deciding: logged, and
// told to the user as Claude Code shows it.
func (b *bridge) nonBlocking(d *tools.BeforeDecision, msg string) {
	b.log.Warn("a hook failed (not blocking)", "error", msg)
	d.SystemMessages = append(d.SystemMessages, msg)
}

func (b *bridge) After(ctx context.Context, req *tools.AfterCall) (*tools.AfterFeedback, error) {
	c := req.Call
	hs := b.set.Matching(hookbridge.PostToolUse, c.Alias)
	if len(hs) == 0 {
		return &tools.AfterFeedback{}, nil
	}
	p := b.payload(ctx, hookbridge.PostToolUse, c, hookbridge.ToolResponse(c.Alias, req.Result))
	fb := &tools.AfterFeedback{}
	var feedback []string
	for _, r := range b.runner.Run(ctx, c.Owner, hs, p) {
		switch {
		case r.Err == nil && !r.TimedOut && r.Signal == "" && r.ExitCode == 2:
			// Exit 2 after a call: stderr goes to the model.
			if e := strings.TrimSpace(string(r.Stderr)); e != "" {
				feedback = append(feedback, e)
			}
			continue
		case r.Err != nil || r.TimedOut || r.Signal != "" || r.ExitCode != 0:
			b.log.Warn("a hook failed (not blocking)", "error", r.Failed())
			fb.SystemMessages = append(fb.SystemMessages, r.Failed())
			continue
		}
		o, err := parse(r)
		if err != nil {
			msg := fmt.Sprintf("hook %s (%s): %v", r.Command, r.Where, err)
			b.log.Warn("a hook failed (not blocking)", "error", msg)
			fb.SystemMessages = append(fb.SystemMessages, msg)
			continue
		}
		if o == nil {
			continue
		}
		if o.SystemMessage != "" {
			fb.SystemMessages = append(fb.SystemMessages, o.SystemMessage)
		}
		if o.Continue != nil && !*o.Continue {
			fb.Stop = true
			fb.StopReason = join(fb.StopReason, orElse(o.StopReason, "hook "+r.Command+" stopped the call"))
		}
		if o.Decision == "block" && o.Reason != "" {
			feedback = append(feedback, o.Reason)
		}
		if s := o.Specific; s != nil && s.AdditionalContext != "" {
			feedback = append(feedback, s.AdditionalContext)
		}
	}
	if len(feedback) > 0 {
		fb.Feedback = "PostToolUse hook feedback:\n" + strings.Join(feedback, "\n")
	}
	return fb, nil
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

var _ tools.Interceptor = (*bridge)(nil)
