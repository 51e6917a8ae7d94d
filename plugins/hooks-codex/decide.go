package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/plugins/lib/hookbridge"
)

// payload is what a hook reads on stdin, as Codex writes it.
type payload struct {
	SessionID      string          `json:"session_id"`
	TurnID         string          `json:"turn_id"`
	TranscriptPath *string         `json:"transcript_path"` // dsh keeps no transcript: null
	Cwd            string          `json:"cwd"`
	HookEventName  string          `json:"hook_event_name"`
	Model          string          `json:"model"`
	PermissionMode string          `json:"permission_mode"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	ToolResponse   json.RawMessage `json:"tool_response,omitempty"`
}

// command is a bash call's command (Codex's Bash tool_input is only it).
func command(c *tools.InterceptedCall) string {
	var a struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(c.Arguments, &a)
	return a.Command
}

func (b *bridge) payload(ctx context.Context, event string, c *tools.InterceptedCall, response json.RawMessage) []byte {
	in := json.RawMessage(c.Arguments)
	if c.Alias == "Bash" {
		in, _ = json.Marshal(map[string]string{"command": command(c)})
	}
	p, _ := json.Marshal(payload{
		SessionID:      b.ids.Session(c.Owner),
		TurnID:         b.ids.Turn(c.CallId),
		Cwd:            b.runner.Cwd(ctx, c),
		HookEventName:  event,
		Model:          b.cfg.Model,
		PermissionMode: "default",
		ToolName:       c.Alias,
		ToolInput:      in,
		ToolUseID:      b.ids.Call(c.CallId),
		ToolResponse:   response,
	})
	return p
}

// universal is the output fields of every event (Codex's
// HookUniversalOutputWire).
type universal struct {
	Continue       *bool   `json:"continue"`
	StopReason     *string `json:"stopReason"`
	SuppressOutput *bool   `json:"suppressOutput"`
	SystemMessage  *string `json:"systemMessage"`
}

type preOutput struct {
	universal
	Decision *string `json:"decision"`
	Reason   *string `json:"reason"`
	Specific *struct {
		HookEventName            *string         `json:"hookEventName"`
		PermissionDecision       *string         `json:"permissionDecision"`
		PermissionDecisionReason *string         `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		AdditionalContext        *string         `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

type postOutput struct {
	universal
	Decision *string `json:"decision"`
	Reason   *string `json:"reason"`
	Specific *struct {
		HookEventName        *string         `json:"hookEventName"`
		AdditionalContext    *string         `json:"additionalContext"`
		UpdatedMCPToolOutput json.RawMessage `json:"updatedMCPToolOutput"`
		UpdatedToolOutput    json.RawMessage `json:"updatedToolOutput"`
	} `json:"hookSpecificOutput"`
}

// strict decodes stdout as Codex does: a JSON object of known keys only,
// nothing after it. ok is false for stdout that is not JSON-looking
// (ignored on exit 0).
func strict(stdout []byte, v any) (ok bool, err error) {
	t := bytes.TrimSpace(stdout)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return true, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return true, fmt.Errorf("text after the JSON object")
	}
	return true, nil
}

func set(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// eventName checks hookSpecificOutput.hookEventName, which Codex requires.
func eventName(n *string) error {
	if n == nil {
		return fmt.Errorf("hookSpecificOutput has no hookEventName")
	}
	if !slices.Contains(codexEvents, *n) {
		return fmt.Errorf("hookEventName %q is no Codex event", *n)
	}
	return nil
}

// pre is one PreToolUse hook's answer: a block (its reason), an input to
// call the tool with, context for the model.
type pre struct {
	block, context, system string
	updated                json.RawMessage
}

// readPre applies Codex's PreToolUse output rules; an error is an
// invalid output, which decides nothing.
func readPre(stdout []byte) (*pre, error) {
	var o preOutput
	ok, err := strict(stdout, &o)
	if !ok {
		return &pre{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hook returned invalid pre-tool-use JSON output: %v", err)
	}
	switch {
	case o.Continue != nil && !*o.Continue:
		return nil, fmt.Errorf("unsupported continue:false")
	case o.StopReason != nil:
		return nil, fmt.Errorf("unsupported stopReason")
	case o.SuppressOutput != nil && *o.SuppressOutput:
		return nil, fmt.Errorf("unsupported suppressOutput")
	}
	p := &pre{system: str(o.SystemMessage)}
	s := o.Specific
	if s != nil {
		if err := eventName(s.HookEventName); err != nil {
			return nil, err
		}
		p.context = str(s.AdditionalContext)
	}
	if s != nil && (s.PermissionDecision != nil || s.PermissionDecisionReason != nil || set(s.UpdatedInput)) {
		reason := strings.TrimSpace(str(s.PermissionDecisionReason))
		switch str(s.PermissionDecision) {
		case "":
			if s.PermissionDecision == nil {
				return nil, fmt.Errorf("permissionDecisionReason or updatedInput without permissionDecision")
			}
			return nil, fmt.Errorf("permissionDecision %q is none of allow, deny, ask", "")
		case "deny":
			if set(s.UpdatedInput) {
				return nil, fmt.Errorf("unsupported updatedInput without permissionDecision:allow")
			}
			if reason == "" {
				return nil, fmt.Errorf("permissionDecision:deny without a permissionDecisionReason")
			}
			p.block = reason
		case "ask":
			return nil, fmt.Errorf("unsupported permissionDecision:ask")
		case "allow":
			if !set(s.UpdatedInput) {
				return nil, fmt.Errorf("unsupported permissionDecision:allow")
			}
			p.updated = s.UpdatedInput
		default:
			return nil, fmt.Errorf("permissionDecision %q is none of allow, deny, ask", *s.PermissionDecision)
		}
		return p, nil
	}
	reason := strings.TrimSpace(str(o.Reason))
	switch {
	case o.Decision == nil && o.Reason != nil:
		return nil, fmt.Errorf("reason without decision")
	case o.Decision == nil:
	case *o.Decision == "approve":
		return nil, fmt.Errorf("unsupported decision:approve")
	case *o.Decision == "block":
		if reason == "" {
			return nil, fmt.Errorf("decision:block without a reason")
		}
		p.block = reason
	default:
		return nil, fmt.Errorf("decision %q is none of approve, block", *o.Decision)
	}
	return p, nil
}

// post is one PostToolUse hook's answer: feedback for the model, a stop.
type post struct {
	feedback []string
	stop     bool
	system   string
}

// readPost applies Codex's PostToolUse output rules; an error is an
// invalid output.
func readPost(stdout []byte) (*post, error) {
	var o postOutput
	ok, err := strict(stdout, &o)
	if !ok {
		return &post{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hook returned invalid post-tool-use JSON output: %v", err)
	}
	if o.SuppressOutput != nil && *o.SuppressOutput {
		return nil, fmt.Errorf("unsupported suppressOutput")
	}
	p := &post{system: str(o.SystemMessage), stop: o.Continue != nil && !*o.Continue}
	reason := strings.TrimSpace(str(o.Reason))
	switch {
	case o.Decision == nil && o.Reason != nil && !p.stop:
		return nil, fmt.Errorf("reason without decision")
	case o.Decision == nil:
	case *o.Decision == "block":
		if reason == "" {
			return nil, fmt.Errorf("decision:block without a reason")
		}
	default:
		return nil, fmt.Errorf("decision %q is not block", *o.Decision)
	}
	var extra string
	if s := o.Specific; s != nil {
		if err := eventName(s.HookEventName); err != nil {
			return nil, err
		}
		if set(s.UpdatedMCPToolOutput) {
			return nil, fmt.Errorf("unsupported updatedMCPToolOutput")
		}
		if set(s.UpdatedToolOutput) {
			return nil, fmt.Errorf("unsupported updatedToolOutput")
		}
		extra = strings.TrimSpace(str(s.AdditionalContext))
	}
	switch {
	case p.stop:
		// The stop's text is what the model reads in the result's place.
		p.feedback = append(p.feedback, orElse(reason, orElse(strings.TrimSpace(str(o.StopReason)), "PostToolUse hook stopped execution")))
	case reason != "":
		p.feedback = append(p.feedback, reason)
	}
	if extra != "" {
		p.feedback = append(p.feedback, extra)
	}
	return p, nil
}

// exited is how a hook ended as Codex reads it: ok for exit 0, two for
// exit 2 (with stderr trimmed), else failed says why.
func exited(r hookbridge.Ran) (ok, two bool, stderr, failed string) {
	switch {
	case r.Err != nil:
		return false, false, "", fmt.Sprintf("hook %s (%s) could not run: %v", r.Command, r.Where, r.Err)
	case r.TimedOut:
		return false, false, "", fmt.Sprintf("hook %s (%s) timed out after %ds", r.Command, r.Where, int(r.Timeout.Seconds()))
	case r.Signal != "":
		return false, false, "", fmt.Sprintf("hook %s (%s) was killed by %s", r.Command, r.Where, r.Signal)
	case r.ExitCode == 0:
		return true, false, "", ""
	case r.ExitCode == 2:
		if e := strings.TrimSpace(string(r.Stderr)); e != "" {
			return false, true, e, ""
		}
		return false, false, "", fmt.Sprintf("hook %s (%s) exited with code 2 but did not write a blocking reason to stderr", r.Command, r.Where)
	}
	return false, false, "", r.Failed()
}

func (b *bridge) Before(ctx context.Context, req *tools.BeforeCall) (*tools.BeforeDecision, error) {
	c := req.Call
	b.background(ctx, hookbridge.PreToolUse, c, nil)
	hs := b.hooks.sync.MatchingAll(hookbridge.PreToolUse, c.Alias)
	if len(hs) == 0 {
		return &tools.BeforeDecision{}, nil
	}
	d := &tools.BeforeDecision{}
	ran, done := b.runner.RunCompleted(ctx, c.Owner, hs, b.payload(ctx, hookbridge.PreToolUse, c, nil))
	var block string
	var contexts []string
	var updated json.RawMessage
	last := -1
	for i, r := range ran {
		ok, two, stderr, failed := exited(r)
		switch {
		case two:
			// The first blocking hook, in configured order, gives the reason.
			if block == "" {
				block = stderr
			}
			continue
		case !ok:
			b.failed(&d.SystemMessages, failed)
			continue
		}
		p, err := readPre(r.Stdout)
		if err == nil && r.StdoutCut {
			err = errCut
		}
		if err != nil {
			b.failed(&d.SystemMessages, fmt.Sprintf("hook %s (%s): %v", r.Command, r.Where, err))
			continue
		}
		if p.system != "" {
			d.SystemMessages = append(d.SystemMessages, p.system)
		}
		if p.context != "" {
			contexts = append(contexts, p.context)
		}
		if p.block != "" && block == "" {
			block = p.block
		}
		// The rewrite of the hook that finished last wins.
		if p.updated != nil && done[i] > last {
			updated, last = p.updated, done[i]
		}
	}
	if len(contexts) > 0 {
		d.AdditionalContext = strings.Join(contexts, "\n\n")
	}
	if block != "" {
		d.Verdict = tools.VerdictDeny
		if c.Alias == "Bash" {
			d.Reason = fmt.Sprintf("Command blocked by PreToolUse hook: %s. Command: %s", block, command(c))
		} else {
			d.Reason = fmt.Sprintf("Tool call blocked by PreToolUse hook: %s. Tool: %s", block, c.Alias)
		}
		return d, nil
	}
	if updated != nil {
		args, err := rewrite(c, updated)
		if err != nil {
			// Codex fails the call with the tool's error to the model.
			d.Verdict, d.Reason = tools.VerdictDeny, err.Error()
			return d, nil
		}
		d.UpdatedArguments = args
	}
	return d, nil
}

// rewrite is a call's arguments after updatedInput: for Bash only its
// command (what Codex's shell tools read of it), for other tools the
// whole input (re-checked against the tool's schema by the host).
func rewrite(c *tools.InterceptedCall, in json.RawMessage) (json.RawMessage, error) {
	up := map[string]json.RawMessage{}
	if err := json.Unmarshal(in, &up); err != nil {
		return nil, fmt.Errorf("PreToolUse hook updatedInput is not a JSON object")
	}
	if c.Alias != "Bash" {
		return in, nil
	}
	var cmd string
	if err := json.Unmarshal(up["command"], &cmd); err != nil || up["command"] == nil {
		return nil, fmt.Errorf("PreToolUse hook updatedInput for Bash has no string \"command\"")
	}
	args := map[string]json.RawMessage{}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return nil, err
	}
	args["command"] = up["command"]
	return json.Marshal(args)
}

// failed records a hook that failed without deciding: logged, and told to
// the user (Codex shows it in the hook's run, not to the model).
func (b *bridge) failed(msgs *[]string, msg string) {
	b.log.Warn("a hook failed (not blocking)", "error", msg)
	*msgs = append(*msgs, msg)
}

// background starts the async hooks of event, which Codex does not wait
// for and which decide nothing: their outcome is only logged.
func (b *bridge) background(ctx context.Context, event string, c *tools.InterceptedCall, response json.RawMessage) {
	hs := b.hooks.async.MatchingAll(event, c.Alias)
	if len(hs) == 0 {
		return
	}
	p := b.payload(ctx, event, c, response)
	go func() {
		for _, r := range b.runner.Run(context.WithoutCancel(ctx), c.Owner, hs, p) {
			if ok, _, _, failed := exited(r); !ok && failed != "" {
				b.log.Warn("an async hook failed", "error", failed)
			}
		}
	}()
}

func (b *bridge) After(ctx context.Context, req *tools.AfterCall) (*tools.AfterFeedback, error) {
	c := req.Call
	resp := hookbridge.ToolResponse(c.Alias, req.Result)
	b.background(ctx, hookbridge.PostToolUse, c, resp)
	hs := b.hooks.sync.MatchingAll(hookbridge.PostToolUse, c.Alias)
	if len(hs) == 0 {
		return &tools.AfterFeedback{}, nil
	}
	fb := &tools.AfterFeedback{}
	var feedback, stops []string
	for _, r := range b.runner.Run(ctx, c.Owner, hs, b.payload(ctx, hookbridge.PostToolUse, c, resp)) {
		ok, two, stderr, failed := exited(r)
		switch {
		case two:
			feedback = append(feedback, stderr)
			continue
		case !ok:
			b.failed(&fb.SystemMessages, failed)
			continue
		}
		p, err := readPost(r.Stdout)
		if err == nil && r.StdoutCut {
			err = errCut
		}
		if err != nil {
			b.failed(&fb.SystemMessages, fmt.Sprintf("hook %s (%s): %v", r.Command, r.Where, err))
			continue
		}
		if p.system != "" {
			fb.SystemMessages = append(fb.SystemMessages, p.system)
		}
		if p.stop {
			stops = append(stops, p.feedback[0])
			feedback = append(feedback, p.feedback[1:]...)
			continue
		}
		feedback = append(feedback, p.feedback...)
	}
	if len(stops) > 0 {
		fb.Stop, fb.StopReason = true, strings.Join(stops, "\n\n")
	}
	if len(feedback) > 0 {
		fb.Feedback = strings.Join(feedback, "\n\n")
	}
	return fb, nil
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var _ tools.Interceptor = (*bridge)(nil)

// errCut is a hook output too long to be read whole (its start is gone).
var errCut = fmt.Errorf("its output is more than dsh reads of a hook (16 MiB, or the executor's spill limit), so it cannot be read")
