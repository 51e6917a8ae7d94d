package composition

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Clients is the clients section: who owns an MCP client's jobs,
// terminals and persistent shells, how long they outlive its connection,
// and which bearer tokens dsh serve --http accepts beside the one it
// prints. dsh serve reads it when it starts.
type Clients struct {
	// Owners is OwnersConnection (also when empty) or OwnersResumable.
	Owners string
	// ReleaseGrace is how long what an ended connection owned waits
	// before it goes; 0 means dsh serve's --release-grace (10s).
	ReleaseGrace time.Duration
	// ResumeWithin is how long a resumable owner waits for its client to
	// come back with its resume handle; 0 means DefaultResumeWithin.
	ResumeWithin time.Duration
	// Tokens are further bearer tokens, each a principal of its own.
	Tokens []ClientToken
	Pos    Pos
}

// ClientToken is one bearer token and the principal it names.
type ClientToken struct {
	Name, Token string
	Pos         Pos
	taint       *taint // which values came from variables, for Masked
}

// How owners end.
const (
	// OwnersConnection: an owner ends with its connection (after the
	// release grace); a client that reconnects starts afresh.
	OwnersConnection = "connection"
	// OwnersResumable: an owner outlives its connection for ResumeWithin,
	// for a client that comes back with the resume handle it was given.
	OwnersResumable = "resumable"
)

// DefaultResumeWithin is how long a resumable owner waits when the
// section does not say; maxResumeWithin bounds what it may say, so that
// a forgotten owner's commands do not run for days.
const (
	DefaultResumeWithin = 10 * time.Minute
	maxResumeWithin     = 24 * time.Hour
	maxReleaseGrace     = time.Hour
	// minTokenLen keeps a guessable token out: the printed one has 64 hex
	// digits.
	minTokenLen = 32
)

var (
	clientsKeys     = []string{"owners", "releaseGrace", "resumeWithin", "tokens"}
	clientsOwners   = []string{OwnersConnection, OwnersResumable}
	clientTokenKeys = []string{"name", "token"}
	principalRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// Resumable reports whether owners outlive their connection.
func (c *Clients) Resumable() bool { return c != nil && c.Owners == OwnersResumable }

// clients reads the clients section.
func (p *parser) clients(c *Composition, kp pair, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil && p.usable(kp.val) {
			p.errorf(kp.val, "clients must be a map with keys %s, got %s", strings.Join(clientsKeys, ", "), describe(v))
		}
		return
	}
	cl := &Clients{Owners: OwnersConnection, Pos: p.pos(kp.key)}
	var resumePair *pair
	for _, cp := range pairs(kp.val) {
		if !p.usable(cp.val) {
			continue
		}
		switch cp.name {
		case "owners":
			s, _ := m[cp.name].(string)
			if s != OwnersConnection && s != OwnersResumable {
				p.errorf(cp.val, "clients.owners: want %s, got %s", strings.Join(clientsOwners, " or "), describe(m[cp.name]))
				continue
			}
			cl.Owners = s
		case "releaseGrace", "resumeWithin":
			limit, dst := maxReleaseGrace, &cl.ReleaseGrace
			if cp.name == "resumeWithin" {
				limit, dst = maxResumeWithin, &cl.ResumeWithin
				resumePair = &cp
			}
			s, isStr := m[cp.name].(string)
			d, err := time.ParseDuration(s)
			if !isStr || err != nil || d <= 0 || d > limit {
				p.errorf(cp.val, "clients.%s: want a positive Go duration up to %v such as \"30s\" or \"10m\", got %s", cp.name, limit, describe(m[cp.name]))
				continue
			}
			*dst = d
		case "tokens":
			cl.Tokens = p.clientTokens(cp, m[cp.name])
		default:
			p.errorf(cp.key, "unknown clients key %q (allowed: %s)", cp.name, strings.Join(clientsKeys, ", "))
		}
	}
	if resumePair != nil && cl.Owners != OwnersResumable {
		p.errorf(resumePair.key, "clients.resumeWithin applies to resumable owners only: add owners: resumable, or remove it")
	}
	if cl.Owners == OwnersResumable && cl.ResumeWithin == 0 {
		cl.ResumeWithin = DefaultResumeWithin
	}
	c.Clients = cl
}

// clientTokens reads clients.tokens: a list of {name, token}.
func (p *parser) clientTokens(kp pair, v any) []ClientToken {
	list, ok := v.([]any)
	seq := resolve(kp.val)
	if !ok || seq == nil || len(seq.Content) != len(list) {
		p.errorf(kp.val, "clients.tokens must be a list of {name, token}, got %s", describeShape(v))
		return nil
	}
	var out []ClientToken
	names, tokens := map[string]int{}, map[string]int{}
	for i, item := range list {
		n := seq.Content[i]
		if !p.usable(n) {
			continue
		}
		tm, ok := item.(map[string]any)
		if !ok {
			p.errorf(n, "clients.tokens entry %d must be a map with %s, got %s", i+1, strings.Join(clientTokenKeys, ", "), describeShape(item))
			continue
		}
		t := ClientToken{Pos: p.pos(n), taint: p.taintOf(n)}
		good := true
		for _, tp := range pairs(n) {
			if !p.usable(tp.val) {
				good = false
				continue
			}
			s, isStr := tm[tp.name].(string)
			switch tp.name {
			case "name":
				if !isStr || !principalRE.MatchString(s) {
					p.errorf(tp.val, "clients.tokens entry %d: name: want letters, digits, '.', '_' or '-' (at most 64), got %s", i+1, describe(tm[tp.name]))
					good = false
					continue
				}
				t.Name = s
			case "token":
				// The value is never repeated in a message: it is a secret.
				if !isStr || len(s) < minTokenLen || strings.ContainsAny(s, " \t\r\n") {
					p.errorf(tp.val, "clients.tokens entry %d: token: want a string of at least %d characters without spaces (such as ${NAME} holding `openssl rand -hex 32`)", i+1, minTokenLen)
					good = false
					continue
				}
				t.Token = s
			default:
				p.errorf(tp.key, "unknown clients.tokens key %q (allowed: %s)", tp.name, strings.Join(clientTokenKeys, ", "))
				good = false
			}
		}
		if !good {
			continue
		}
		if t.Name == "" || t.Token == "" {
			p.errorf(n, "clients.tokens entry %d needs both name and token", i+1)
			continue
		}
		if j, dup := names[t.Name]; dup {
			p.errorf(n, "clients.tokens entry %d: the name %q is entry %d's already", i+1, t.Name, j)
			continue
		}
		if j, dup := tokens[t.Token]; dup {
			p.errorf(n, "clients.tokens entry %d: the same token as entry %d", i+1, j)
			continue
		}
		names[t.Name], tokens[t.Token] = i+1, i+1
		out = append(out, t)
	}
	return out
}

// describeShape is describe without a string's value: where a token is
// expected, a string may well be one (tokens: ${CI_TOKEN}).
func describeShape(v any) string {
	if _, ok := v.(string); ok {
		return "a string"
	}
	return describe(v)
}

// String names the owners setting as a log line shows it.
func (c *Clients) String() string {
	if c == nil {
		return OwnersConnection
	}
	if c.Resumable() {
		return fmt.Sprintf("%s for %v", c.Owners, c.ResumeWithin)
	}
	return c.Owners
}
