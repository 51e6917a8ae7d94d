package composition

import (
	"slices"
	"strings"
	"time"
)

// Approval is the composition's approval section: the rules ctx.approval
// answers by, first match wins, and what it answers when none matches.
type Approval struct {
	Rules []ApprovalRule
	// Otherwise is the decision when no rule matches: "deny", or "ask"
	// (the MCP client's user).
	Otherwise string
	// AskTimeout bounds how long a question waits for the user's answer;
	// 0 means DefaultAskTimeout.
	AskTimeout time.Duration
	// Channels are where a question goes: "client" (the MCP client's
	// user, by elicitation) and "console" (the page dsh serve shows the
	// person who runs it); both listed, the first answer counts. Empty
	// means the client alone (DefaultChannels).
	Channels []string
	Pos      Pos
}

// The channels a question can go to.
const (
	ChannelClient  = "client"
	ChannelConsole = "console"
)

// DefaultChannels are where questions go when the section does not say.
var DefaultChannels = []string{ChannelClient}

// Asks reports whether questions go to channel.
func (a *Approval) Asks(channel string) bool {
	if a == nil {
		return false
	}
	if len(a.Channels) == 0 {
		return slices.Contains(DefaultChannels, channel)
	}
	return slices.Contains(a.Channels, channel)
}

// DefaultAskTimeout is how long a question waits for the user when the
// section does not say.
const DefaultAskTimeout = 2 * time.Minute

// maxAskTimeout keeps a forgotten question from holding a call for hours.
const maxAskTimeout = time.Hour

// ApprovalRule is one rule: a pattern of the whole command, the sandbox
// mode it covers ("" for any) and the decision.
type ApprovalRule struct {
	Match    string // * stands for any text
	Mode     string
	Decision string // "allow", "deny" or "ask"
	Pos      Pos
}

var (
	approvalKeys      = []string{"rules", "otherwise", "askTimeout", "channels"}
	approvalChannels  = []string{ChannelClient, ChannelConsole}
	approvalRuleKeys  = []string{"match", "mode", "decision"}
	approvalDecisions = []string{"allow", "deny", "ask"}
)

// approval reads the approval section.
func (p *parser) approval(c *Composition, kp pair, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil && p.usable(kp.val) {
			p.errorf(kp.val, "approval must be a map with keys %s, got %s", strings.Join(approvalKeys, ", "), describe(v))
		}
		return
	}
	a := &Approval{Otherwise: "ask", Pos: p.pos(kp.key)}
	for _, ap := range pairs(kp.val) {
		if !p.usable(ap.val) {
			continue
		}
		switch ap.name {
		case "otherwise":
			s, _ := m[ap.name].(string)
			if s != "deny" && s != "ask" {
				p.errorf(ap.val, "approval.otherwise: want deny or ask, got %s", describe(m[ap.name]))
				continue
			}
			a.Otherwise = s
		case "askTimeout":
			s, isStr := m[ap.name].(string)
			d, err := time.ParseDuration(s)
			if !isStr || err != nil || d <= 0 || d > maxAskTimeout {
				p.errorf(ap.val, "approval.askTimeout: want a positive Go duration up to %v such as \"2m\" or \"90s\", got %s", maxAskTimeout, describe(m[ap.name]))
				continue
			}
			a.AskTimeout = d
		case "channels":
			list, ok := m[ap.name].([]any)
			seq := resolve(ap.val)
			if !ok || seq == nil || len(seq.Content) != len(list) || len(list) == 0 {
				p.errorf(ap.val, "approval.channels must be a list of one or both of %s, got %s", strings.Join(approvalChannels, ", "), describe(m[ap.name]))
				continue
			}
			var chans []string
			for i, item := range list {
				s, _ := item.(string)
				switch {
				case !slices.Contains(approvalChannels, s):
					p.errorf(seq.Content[i], "approval.channels entry %d: want one of %s, got %s", i+1, strings.Join(approvalChannels, ", "), describe(item))
				case slices.Contains(chans, s):
					p.errorf(seq.Content[i], "approval.channels entry %d: %s is listed twice", i+1, s)
				default:
					chans = append(chans, s)
				}
			}
			if len(chans) == len(list) {
				a.Channels = chans
			}
		case "rules":
			list, ok := m[ap.name].([]any)
			seq := resolve(ap.val)
			if !ok || seq == nil || len(seq.Content) != len(list) {
				p.errorf(ap.val, "approval.rules must be a list of rules (match, mode, decision), got %s", describe(m[ap.name]))
				continue
			}
			for i, item := range list {
				n := seq.Content[i]
				rm, ok := item.(map[string]any)
				if !ok {
					p.errorf(n, "approval.rules entry %d must be a map with %s, got %s", i+1, strings.Join(approvalRuleKeys, ", "), describe(item))
					continue
				}
				r := ApprovalRule{Pos: p.pos(n)}
				good := true
				for _, rp := range pairs(n) {
					s, isStr := rm[rp.name].(string)
					switch rp.name {
					case "match":
						if !isStr || strings.TrimSpace(s) == "" {
							p.errorf(rp.val, "approval.rules entry %d: match must be a command pattern, got %s", i+1, describe(rm[rp.name]))
							good = false
						}
						r.Match = strings.TrimSpace(s)
					case "mode":
						if !isStr || !slices.Contains(sandboxModes, s) {
							p.errorf(rp.val, "approval.rules entry %d: mode must be one of %s, got %s", i+1, strings.Join(sandboxModes, ", "), describe(rm[rp.name]))
							good = false
						}
						r.Mode = s
					case "decision":
						if !isStr || !slices.Contains(approvalDecisions, s) {
							p.errorf(rp.val, "approval.rules entry %d: decision must be one of %s, got %s", i+1, strings.Join(approvalDecisions, ", "), describe(rm[rp.name]))
							good = false
						}
						r.Decision = s
					default:
						p.errorf(rp.key, "approval.rules entry %d: unknown key %q (allowed: %s)", i+1, rp.name, strings.Join(approvalRuleKeys, ", "))
						good = false
					}
				}
				if good && (r.Match == "" || r.Decision == "") {
					p.errorf(n, "approval.rules entry %d needs match and decision", i+1)
					good = false
				}
				if good {
					a.Rules = append(a.Rules, r)
				}
			}
		default:
			p.errorf(ap.key, "unknown approval key %q (allowed: %s)", ap.name, strings.Join(approvalKeys, ", "))
		}
	}
	c.Approval = a
}
