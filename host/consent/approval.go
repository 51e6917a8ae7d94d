// Package consent is the host's side of ctx.approval: it answers "may this
// happen?" by the composition's approval section, first matching rule
// first, and fails closed. A rule that would allow never matches a command
// with shell metacharacters (what is allowed is the command as written,
// not what a ; or a $( ) would add to it). "ask" goes to the user behind
// the call through its front end's Asker (the MCP client's user, by
// elicitation) and, when approval.channels lists console, to the console's
// desk as well (the first answer counts); without anyone to ask, or
// without an answer in time, it is a denial that says why. Every decision is logged: who asked, what, and which rule
// or answer decided.
package consent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/internal/seam"
)

// Service is ctx.approval for one plugin. Serving finds the call a
// request serves, as the host stamped it: the agent it serves (a request's
// own owner field is ignored) and who can ask its user.
type Service struct {
	Policy  *Policy
	Caller  string
	Serving func(context.Context) (Call, bool)
}

// Call is the tool call a request serves: its id and owner, and the Asker
// of the front end that made it (nil: nobody can ask its user, as for
// `dsh call`).
type Call struct {
	seam.Served
	Asker Asker
}

var _ approval.Approver = (*Service)(nil)

// Policy holds the section the host runs under (replaced on an edit).
type Policy struct {
	section atomic.Pointer[composition.Approval]
	log     hclog.Logger
	desk    Desk
}

// Desk is where questions wait for the console (approval.channels).
func (p *Policy) Desk() *Desk { return &p.desk }

// asksConsole reports whether questions go to the console.
func (p *Policy) asksConsole() bool {
	return p.section.Load().Asks(composition.ChannelConsole)
}

// NewPolicy decides by section (nil: deny everything).
func NewPolicy(section *composition.Approval, log hclog.Logger) *Policy {
	p := &Policy{log: log}
	p.Set(section)
	return p
}

// Set replaces the section.
func (p *Policy) Set(section *composition.Approval) { p.section.Store(section) }

// AskTimeout is how long a question waits for the user's answer.
func (p *Policy) AskTimeout() time.Duration {
	if a := p.section.Load(); a != nil && a.AskTimeout > 0 {
		return a.AskTimeout
	}
	return composition.DefaultAskTimeout
}

func (s *Service) Approve(ctx context.Context, req *approval.Request) (*approval.Decision, error) {
	var call Call
	served := false
	if s.Serving != nil {
		call, served = s.Serving(ctx)
	}
	owner := call.Owner
	d, why := s.Policy.Decide(req)
	if d == nil {
		d = s.ask(ctx, call, served, req, why)
	}
	msg := "approval denied"
	if d.Approved {
		msg = "approval granted"
	}
	s.Policy.log.Info(msg, "approved", d.Approved, "decided_by", d.DecidedBy, "reason", d.Reason, "asked_because", why,
		"kind", req.Kind, "owner", owner, "plugin", s.Caller, "tool", req.Tool, "command", req.Command, "target_mode", req.TargetMode, "hosts", req.Hosts)
	return d, nil
}

// Decide answers req by the section. A nil decision means the section
// says to ask the user, and why names the rule (or that none matched).
func (p *Policy) Decide(req *approval.Request) (d *approval.Decision, why string) {
	a := p.section.Load()
	if a == nil {
		return &approval.Decision{Reason: "denied: the composition has no approval section, so nothing is approved", DecidedBy: approval.ByNone}, ""
	}
	meta := hasMeta(req.Command)
	for i, r := range a.Rules {
		if r.Mode != "" && r.Mode != req.TargetMode {
			continue
		}
		if !matches(r.Match, strings.TrimSpace(req.Command)) {
			continue
		}
		if r.Decision == "allow" && meta {
			continue // an allow rule covers the command as written, nothing added
		}
		where := fmt.Sprintf("approval rule %d (%s)", i+1, r.Pos)
		switch r.Decision {
		case "allow":
			return &approval.Decision{Approved: true, Reason: "allowed by " + where, DecidedBy: approval.ByPolicy}, ""
		case "deny":
			return &approval.Decision{Reason: "denied by " + where, DecidedBy: approval.ByPolicy}, ""
		}
		return nil, "asked by " + where
	}
	if a.Otherwise == "deny" {
		return &approval.Decision{Reason: "denied: no approval rule matches, and otherwise is deny", DecidedBy: approval.ByPolicy}, ""
	}
	why = "no approval rule matches"
	if meta {
		why += " (allow rules never match a command with ; & | < > ` $ ( ) or a newline)"
	}
	return nil, why
}

// meta are the characters that make a command more than one command, or
// one whose words are not those written.
const meta = ";&|<>`$()\n\r\\"

func hasMeta(cmd string) bool { return strings.ContainsAny(cmd, meta) }

// matches reports whether pattern matches all of s; * stands for any text
// (spaces and slashes included), everything else for itself.
func matches(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}
