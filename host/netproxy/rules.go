package netproxy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Rules is a composition's sandbox.network map.
type Rules struct {
	// Allow lists the destinations commands may reach: "example.com",
	// "*.example.com" (subdomains only, not the apex), either with an
	// optional ":port" ("example.com:443"), or IPv4/IPv6 literals
	// ("127.0.0.1:4873", "[::1]:80", "10.0.0.7").
	Allow []string
	// Deny has the syntax of Allow and wins over it.
	Deny []string
	// Mode is "full" (the default, also "") or "limited".
	Mode string
	// Hosts maps a name to an IP address, like /etc/hosts. The user wrote it,
	// so its addresses are trusted: they may be loopback or link-local.
	Hosts map[string]string
}

const (
	ModeFull    = "full"
	ModeLimited = "limited"
)

// pattern is one parsed Allow or Deny entry.
type pattern struct {
	text     string     // the entry as written, for the rule in words
	domain   string     // lower case, no trailing dot, without "*."; "" for an IP literal
	wildcard bool       // "*.domain": subdomains only
	ip       netip.Addr // valid for an IP literal
	port     int        // 0: any port
}

// parsePattern parses an Allow or Deny entry; the error says what is wrong
// with it without repeating it.
func parsePattern(s string) (pattern, error) {
	p := pattern{text: s}
	hostPart, portPart := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return p, fmt.Errorf("unclosed [")
		}
		hostPart, portPart = s[1:end], s[end+1:]
		if portPart != "" {
			if !strings.HasPrefix(portPart, ":") {
				return p, fmt.Errorf("not an address or [address]:port")
			}
			portPart = portPart[1:]
			if portPart == "" {
				return p, fmt.Errorf("empty port")
			}
		}
		a, err := netip.ParseAddr(hostPart)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return p, fmt.Errorf("not an IPv6 address in brackets")
		}
		p.ip = a
	default:
		if a, err := netip.ParseAddr(s); err == nil {
			// a bare IPv6 address ("::1") or an IPv4 address without port
			if a.Zone() != "" {
				return p, fmt.Errorf("an address with a zone")
			}
			p.ip = a
			return p, nil
		}
		if i := strings.LastIndex(s, ":"); i >= 0 {
			hostPart, portPart = s[:i], s[i+1:]
			if portPart == "" {
				return p, fmt.Errorf("empty port")
			}
		}
		if a, err := netip.ParseAddr(hostPart); err == nil {
			if !a.Is4() {
				return p, fmt.Errorf("an IPv6 address with a port needs brackets: [%s]:%s", hostPart, portPart)
			}
			p.ip = a
			break
		}
		name := strings.TrimSuffix(strings.ToLower(hostPart), ".")
		if rest, ok := strings.CutPrefix(name, "*."); ok {
			p.wildcard = true
			name = rest
		}
		name = asciiName(name)
		if !validDomain(name) {
			return p, fmt.Errorf("not a domain pattern")
		}
		p.domain = name
	}
	if portPart != "" {
		n, err := strconv.Atoi(portPart)
		if err != nil || n < 1 || n > 65535 {
			return p, fmt.Errorf("port %q is not a number from 1 to 65535", portPart)
		}
		p.port = n
	}
	return p, nil
}

// asciiName is a name written with letters beyond ASCII in the ASCII
// (punycode) form that clients ask for and DNS holds: "bücher.test" is
// "xn--bcher-kva.test". A name it cannot convert is left as it is, for
// validDomain to refuse.
func asciiName(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			if a, err := idna.Lookup.ToASCII(name); err == nil {
				return strings.TrimSuffix(a, ".")
			}
			return name
		}
	}
	return name
}

// validDomain reports whether name (lower case, no trailing dot) is a host
// name: dot-separated labels of letters, digits, '-' and '_'.
func validDomain(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// matchHost matches a normalized request host (see normalizeHost).
func (p pattern) match(h reqHost, port int) bool {
	if p.port != 0 && p.port != port {
		return false
	}
	if h.ip.IsValid() {
		return p.ip.IsValid() && p.ip == h.ip
	}
	if p.domain == "" {
		return false
	}
	if p.wildcard {
		return strings.HasSuffix(h.name, "."+p.domain)
	}
	return h.name == p.domain
}

// reqHost is a requested host: an IP literal or a lower-case name.
type reqHost struct {
	name string     // lower case, no trailing dot; the IP's text for a literal
	ip   netip.Addr // valid for an IP literal
}

// normalizeHost reads a requested host: case and one trailing dot do not
// count, IPv6 literals may come in brackets. ok is false for anything that
// is neither a host name nor an IP address.
func normalizeHost(host string) (reqHost, bool) {
	h := host
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return reqHost{}, false
		}
		return reqHost{name: a.String(), ip: a}, true
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if !validDomain(h) {
		return reqHost{}, false
	}
	return reqHost{name: h}, true
}

// compiled is Rules parsed once.
type compiled struct {
	allow, deny []pattern
	limited     bool
	hosts       map[string]netip.Addr
}

func (r Rules) compile() (*compiled, error) {
	c := &compiled{hosts: map[string]netip.Addr{}}
	for i, s := range r.Allow {
		p, err := parsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("allow[%d] %q: %v", i, s, err)
		}
		c.allow = append(c.allow, p)
	}
	for i, s := range r.Deny {
		p, err := parsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("deny[%d] %q: %v", i, s, err)
		}
		c.deny = append(c.deny, p)
	}
	switch r.Mode {
	case "", ModeFull:
	case ModeLimited:
		c.limited = true
	default:
		return nil, fmt.Errorf("mode %q: not %q or %q", r.Mode, ModeFull, ModeLimited)
	}
	for name, addr := range r.Hosts {
		h, ok := normalizeHost(asciiName(strings.ToLower(name)))
		if !ok || h.ip.IsValid() {
			return nil, fmt.Errorf("hosts %q: not a host name", name)
		}
		a, err := netip.ParseAddr(strings.TrimSpace(addr))
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("hosts %q: %q is not an IP address", name, addr)
		}
		c.hosts[h.name] = a
	}
	return c, nil
}

// CheckPattern reports what is wrong with one Allow or Deny entry, without
// repeating it (e.g. `not a domain pattern`); nil for a good one.
func CheckPattern(s string) error {
	_, err := parsePattern(s)
	return err
}

// Check reports the first bad entry: a pattern, the mode or a Hosts entry,
// named with its list and index, e.g. `allow[2] "*.": not a domain pattern`.
func (r Rules) Check() error {
	_, err := r.compile()
	return err
}

// Decide applies Deny, then Allow, to host and port, before any name is
// resolved. rule says why in words: `denied by deny "*.evil.test"`,
// `allowed by allow "api.test:443"`, `not in allow`. Invalid entries (see
// Check) match nothing.
func (r Rules) Decide(host string, port int) (allowed bool, rule string) {
	c := r.lenient()
	h, ok := normalizeHost(host)
	if !ok {
		return false, fmt.Sprintf("%q is not a host name", host)
	}
	return c.decide(h, port)
}

// lenient compiles r skipping bad entries, for Decide on unchecked Rules.
func (r Rules) lenient() *compiled {
	c := &compiled{}
	for _, s := range r.Allow {
		if p, err := parsePattern(s); err == nil {
			c.allow = append(c.allow, p)
		}
	}
	for _, s := range r.Deny {
		if p, err := parsePattern(s); err == nil {
			c.deny = append(c.deny, p)
		}
	}
	return c
}

// matchDeny is match for a Deny entry: an IPv4 address and its
// IPv4-mapped IPv6 form are one address, so that neither spelling gets
// past an entry in the other.
func (p pattern) matchDeny(h reqHost, port int) bool {
	if p.ip.IsValid() && h.ip.IsValid() {
		return (p.port == 0 || p.port == port) && p.ip.Unmap() == h.ip.Unmap()
	}
	return p.match(h, port)
}

func (c *compiled) decide(h reqHost, port int) (bool, string) {
	for _, p := range c.deny {
		if p.matchDeny(h, port) {
			return false, fmt.Sprintf("denied by deny %q", p.text)
		}
	}
	for _, p := range c.allow {
		if p.match(h, port) {
			return true, fmt.Sprintf("allowed by allow %q", p.text)
		}
	}
	return false, "not in allow"
}

// deniedAddr returns the Deny IP-literal entry that names a resolved
// address, so that a name cannot lead to an address the user denied.
func (c *compiled) deniedAddr(a netip.Addr, port int) (string, bool) {
	h := reqHost{name: a.String(), ip: a}
	for _, p := range c.deny {
		if p.ip.IsValid() && p.matchDeny(h, port) {
			return p.text, true
		}
	}
	return "", false
}
