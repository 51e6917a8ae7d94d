package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/consent"
	"github.com/dshrun/dsh/internal/randid"
)

// Asking the user. When ctx.approval's policy says "ask", the host asks
// the user behind the call through the callAsker the handler gave with
// the call (host.ToolCall), so a question goes only to the session that
// made the call. How it is put depends on the protocol the session speaks:
//
//   - Before 2026-07-28: an elicitation request (ServerSession.Elicit) on
//     the call's own stream while the call waits, at most askTimeout.
//   - From 2026-07-28: the go-sdk refuses server-initiated requests while a
//     call is served (SEP-2322, multi round-trip). The call is stopped at
//     the question (tools ask before they run anything, so nothing past it
//     ran), its result carries the elicitation as an input request, and
//     the client repeats the call with the user's answer; the repeated
//     call's question finds it. An answer is good for the repetition of
//     the call it was asked in (same session, tool and arguments), once,
//     until askTimeout has passed; each round runs the call from the start,
//     so the answers of earlier rounds come along.
//
// A client that did not declare form elicitation is not asked: that is a
// denial that says so.

// roundsFrom is the first protocol version on which a question goes back
// with the result. The test is the go-sdk's own (the version the session
// started with), so dsh never calls Elicit where the go-sdk refuses it.
const roundsFrom = "2026-07-28"

// inputID names the approval question among a result's input requests.
const inputID = "dsh-approval"

// lateKeep is how long after it expired a question is remembered, so an
// answer that comes late is told it was late.
const lateKeep = 10 * time.Minute

// callAsker asks the user behind one tool call.
type callAsker struct {
	s     *Server
	req   *mcp.CallToolRequest
	ctx   context.Context // the call's: an elicitation goes on its stream
	owner string
	// stop ends the call once its question is to go back with the result.
	stop   context.CancelFunc
	rounds bool

	mu      sync.Mutex
	answers map[string]answer // the user's answers this repeated call carries, by question
	asked   *question         // the question to send back with the result
}

var _ consent.Asker = (*callAsker)(nil)

// answer is what the user (or the lack of one) said to a question.
type answer struct {
	d   *approval.Decision
	err error
}

// question is one approval question sent back with a result, waiting for
// the call to be repeated with its answer.
type question struct {
	key     string // of the request asked
	owner   string
	tool    string
	args    string // canonical arguments of the call
	params  *mcp.ElicitParams
	expires time.Time
	earlier map[string]answer // answers of the same call's earlier rounds
}

// newAsker makes the asker of one call; for a repeated call it takes up
// the answers it carries.
func (s *Server) newAsker(ctx context.Context, req *mcp.CallToolRequest, owner string, stop context.CancelFunc) *callAsker {
	a := &callAsker{s: s, req: req, ctx: ctx, owner: owner, stop: stop}
	if req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= roundsFrom {
			a.rounds = true
		}
	}
	if a.rounds {
		a.answers = s.resume(req, owner)
	}
	return a
}

func (a *callAsker) Ask(ctx context.Context, owner string, req *approval.Request) (*approval.Decision, error) {
	if owner != a.owner {
		return nil, errors.New("the call belongs to another session")
	}
	if a.req.Session == nil {
		return nil, errors.New("the call has no MCP session")
	}
	if err := a.canElicit(); err != nil {
		return nil, err
	}
	params := elicitParams(a.req.Params.Name, req)
	if a.rounds {
		return a.inRounds(ctx, req, params)
	}
	// On the call's context (its stream), ended with the wait.
	ectx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	if t, ok := a.ctx.Value(taskKey{}).(*task); ok {
		done, err := a.s.tasks.awaitClient(ectx, t)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errors.New("the call was cancelled before the user answered")
		}
		defer done()
	}
	a.s.log.Debug("asking the user", "owner", owner, "command", req.Command, "target_mode", req.TargetMode, "hosts", req.Hosts)
	res, err := a.req.Session.Elicit(ectx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if a.ctx.Err() != nil {
			return nil, errors.New("the call was cancelled before the user answered")
		}
		return nil, clientFailure(err)
	}
	return decide(res)
}

// canElicit says why the client cannot ask its user a form, if it cannot.
func (a *callAsker) canElicit() error {
	caps := a.req.ClientCapabilities()
	name := ""
	if ci := a.req.ClientInfo(); ci != nil && ci.Name != "" {
		name = " " + strconv.Quote(ci.Name)
	}
	switch {
	case caps == nil || caps.Elicitation == nil:
		return fmt.Errorf("the MCP client%s does not support elicitation (it declared no elicitation capability), so it cannot ask its user", name)
	case caps.Elicitation.Form == nil && caps.Elicitation.URL != nil:
		return fmt.Errorf("the MCP client%s supports only URL elicitation, not the form this question needs", name)
	}
	return nil
}

// inRounds answers a question from the answers the repeated call
// carries, or stops the call and keeps the question to send back.
func (a *callAsker) inRounds(ctx context.Context, req *approval.Request, params *mcp.ElicitParams) (*approval.Decision, error) {
	key := questionKey(req)
	a.mu.Lock()
	defer a.mu.Unlock()
	if ans, ok := a.answers[key]; ok {
		return ans.d, ans.err
	}
	if a.asked != nil {
		// One question per round; the next one comes in the next round.
		return nil, consent.ErrAskedLater
	}
	expires := time.Now().Add(composition.DefaultAskTimeout)
	if dl, ok := ctx.Deadline(); ok {
		expires = dl
	}
	a.asked = &question{key: key, owner: a.owner, tool: a.req.Params.Name, args: canonical(a.req.Params.Arguments), params: params, expires: expires, earlier: a.answers}
	a.stop()
	a.s.log.Debug("the question goes back with the result", "owner", a.owner, "command", req.Command, "target_mode", req.TargetMode, "hosts", req.Hosts)
	return nil, consent.ErrAskedLater
}

// inputRequired is the result that sends the call's question back, or nil
// when the call asked none.
func (a *callAsker) inputRequired() *mcp.CallToolResult {
	a.mu.Lock()
	q := a.asked
	a.mu.Unlock()
	if q == nil {
		return nil
	}
	token := randid.New() // the request state
	a.s.amu.Lock()
	now := time.Now()
	for t, old := range a.s.asks {
		if now.After(old.expires.Add(lateKeep)) {
			delete(a.s.asks, t)
		}
	}
	a.s.asks[token] = q
	a.s.amu.Unlock()
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{inputID: q.params}, RequestState: token}
}

// resume takes up the question a repeated call answers: its answer, and
// those of the call's earlier rounds. A state that is not this session's
// question for this tool and these arguments carries no answer (the call
// asks anew); each state is good once.
func (s *Server) resume(req *mcp.CallToolRequest, owner string) map[string]answer {
	token := req.Params.RequestState
	if token == "" {
		return nil
	}
	s.amu.Lock()
	q := s.asks[token]
	if q != nil && q.owner == owner {
		delete(s.asks, token) // good once, and only for its session
	}
	s.amu.Unlock()
	if q == nil || q.owner != owner || q.tool != req.Params.Name || q.args != canonical(req.Params.Arguments) {
		s.log.Debug("a repeated call answers no question of this session and call; it asks anew", "owner", owner, "tool", req.Params.Name)
		return nil
	}
	answers := map[string]answer{}
	for k, v := range q.earlier {
		answers[k] = v
	}
	var ans answer
	res, _ := req.Params.InputResponses[inputID].(*mcp.ElicitResult)
	switch {
	case time.Now().After(q.expires):
		ans.err = fmt.Errorf("the answer came too late: %w", context.DeadlineExceeded)
	case res == nil:
		ans.err = errors.New("the client repeated the call without the user's answer")
	default:
		ans.d, ans.err = decide(res)
	}
	answers[q.key] = ans
	return answers
}

// forgetQuestions drops an ended session's questions.
func (s *Server) forgetQuestions(owner string) {
	s.amu.Lock()
	defer s.amu.Unlock()
	for t, q := range s.asks {
		if q.owner == owner {
			delete(s.asks, t)
		}
	}
}

// decide is the user's elicitation answer as a decision.
func decide(res *mcp.ElicitResult) (*approval.Decision, error) {
	user := func(approved bool, reason string) (*approval.Decision, error) {
		return &approval.Decision{Approved: approved, Reason: reason, DecidedBy: approval.ByUser}, nil
	}
	switch res.Action {
	case "accept":
		if ok, _ := res.Content["approve"].(bool); ok {
			return user(true, "approved by the user")
		}
		return user(false, "denied by the user (the form was sent without approve)")
	case "decline":
		return user(false, "denied by the user (declined)")
	case "cancel":
		return user(false, "denied: the user dismissed the question without answering")
	}
	return nil, fmt.Errorf("the client answered with the unknown action %q", res.Action)
}

// clientFailure is why an elicitation failed, without the transport's
// words.
func clientFailure(err error) error {
	var we *jsonrpc.Error
	switch {
	case errors.Is(err, mcp.ErrConnectionClosed):
		return errors.New("the MCP session ended before its user answered")
	case errors.As(err, &we):
		return fmt.Errorf("the MCP client failed to ask its user: %s", we.Message)
	}
	return fmt.Errorf("the MCP client failed to ask its user: %v", err)
}

// elicitParams is the question a user reads: the tool they called (by
// the call's own name, not the plugin's word), what runs, with which
// access, and the model's reason; one boolean to approve.
func elicitParams(called string, req *approval.Request) *mcp.ElicitParams {
	var b strings.Builder
	tool := "The " + shown(called) + " tool"
	switch req.Kind {
	case approval.KindSandboxEscalation:
		fmt.Fprintf(&b, "%s asks to run a command with more access than its sandbox gives (%s):\n\n", tool, shown(req.TargetMode))
	case approval.KindNetworkEscalation:
		hosts := make([]string, len(req.Hosts))
		for i, h := range req.Hosts {
			hosts[i] = shown(h)
		}
		fmt.Fprintf(&b, "%s asks to let a command reach hosts its sandbox's network rules do not allow (%s):\n\n", tool, strings.Join(hosts, ", "))
	default:
		fmt.Fprintf(&b, "%s asks for your approval before it runs:\n\n", tool)
	}
	fmt.Fprintf(&b, "    %s\n\n", shown(req.Command))
	if req.Reason != "" {
		fmt.Fprintf(&b, "Its reason (the model's words): %s\n\n", shown(req.Reason))
	}
	if req.Kind == approval.KindNetworkEscalation {
		if local := localHosts(req.Hosts); len(local) > 0 {
			verb := "is"
			if len(local) > 1 {
				verb = "are"
			}
			fmt.Fprintf(&b, "%s %s this computer or its local link: the command would reach what listens there, outside its sandbox.\n\n", joinAnd(local), verb)
		}
	}
	b.WriteString("Approve this one run? Nothing runs unless you approve.")
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: b.String(),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{
					"type":        "boolean",
					"title":       "Approve",
					"description": "Run it this once",
					"default":     false,
				},
			},
		},
	}
}

// shown is text as a user may safely read it: quoted, with escapes, when
// it holds anything that is not printable (a carriage return or a bidi
// control could make it look like something else).
func shown(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s) + " (quoted: it holds control characters)"
		}
	}
	return s
}

// questionKey identifies what was asked.
func questionKey(req *approval.Request) string {
	h := sha256.New()
	for _, f := range append([]string{req.Kind, req.Tool, req.Command, req.TargetMode, req.Reason}, req.Hosts...) {
		fmt.Fprintf(h, "%d:%s", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonical is a call's arguments in one spelling, whatever the client's
// key order or spacing.
func canonical(args json.RawMessage) string {
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber() // numbers as written: two calls differing in a digit differ
	var v any
	if len(args) == 0 || d.Decode(&v) != nil {
		return string(args)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// localHosts are the hosts that are IP literals of this computer's
// (loopback) or of its link (link-local): the sandbox's proxy reaches
// them from the host, so 127.0.0.1 is the host's own, not the sandbox's.
func localHosts(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		a, err := netip.ParseAddr(h)
		if err != nil {
			host, _, serr := net.SplitHostPort(h)
			if serr != nil {
				continue
			}
			if a, err = netip.ParseAddr(host); err != nil {
				continue
			}
		}
		if a = a.Unmap(); a.IsLoopback() || a.IsLinkLocalUnicast() {
			out = append(out, shown(h))
		}
	}
	return out
}

// joinAnd joins "a", "a and b", "a, b and c".
func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
