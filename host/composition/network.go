package composition

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/dshrun/dsh/host/netproxy"
)

// NetworkRules is a sandbox section's network map: confined commands reach
// the network only through the host's proxy, which lets through what
// these rules allow (host/netproxy says how each is read).
type NetworkRules struct {
	Allow []string          // domain patterns and IP literals, optionally with :port
	Deny  []string          // the same; a match wins over Allow
	Mode  string            // NetworkFull or NetworkLimited
	Hosts map[string]string // names resolved to these addresses without DNS
}

// The network map's modes.
const (
	NetworkFull    = "full"
	NetworkLimited = "limited"
)

var networkKeys = []string{"allow", "deny", "mode", "hosts"}

// network reads sandbox.network: true, false, or the proxy's rules.
func (p *parser) network(sb *Sandbox, sp pair, v any) {
	if b, ok := v.(bool); ok {
		sb.Network = b
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.errorf(sp.val, "sandbox.network must be true, false or a map with keys %s, got %s", strings.Join(networkKeys, ", "), describe(v))
		return
	}
	rules := &NetworkRules{Mode: NetworkFull}
	for _, np := range pairs(sp.val) {
		if !p.usable(np.val) {
			continue
		}
		switch np.name {
		case "allow", "deny":
			list, ok := m[np.name].([]any)
			if !ok {
				p.errorf(np.val, "sandbox.network.%s must be a list of domains (example.com, *.example.com, optionally :port), got %s", np.name, describe(m[np.name]))
				continue
			}
			items := itemNodes(np.val)
			for i, item := range list {
				at := np.val
				if i < len(items) {
					at = items[i]
				}
				s, ok := item.(string)
				if !ok || s == "" {
					p.errorf(at, "sandbox.network.%s: want a domain, got %s", np.name, describe(item))
					continue
				}
				if err := netproxy.CheckPattern(s); err != nil {
					p.errorf(at, "sandbox.network.%s: %q: %v (want example.com, *.example.com or an IP address, each optionally with :port)", np.name, s, err)
					continue
				}
				if np.name == "allow" {
					rules.Allow = append(rules.Allow, s)
				} else {
					rules.Deny = append(rules.Deny, s)
				}
			}
		case "mode":
			s, _ := m[np.name].(string)
			if s != NetworkFull && s != NetworkLimited {
				p.errorf(np.val, "sandbox.network.mode: want %s (any request the rules allow) or %s (plain HTTP GET, HEAD and OPTIONS only), got %s", NetworkFull, NetworkLimited, describe(m[np.name]))
				continue
			}
			rules.Mode = s
		case "hosts":
			hm, ok := m[np.name].(map[string]any)
			if !ok {
				p.errorf(np.val, "sandbox.network.hosts must be a map of names to addresses, got %s", describe(m[np.name]))
				continue
			}
			rules.Hosts = map[string]string{}
			for _, hp := range pairs(np.val) {
				addr, ok := hm[hp.name].(string)
				if !ok {
					p.errorf(hp.val, "sandbox.network.hosts.%s must be an IP address, got %s", hp.name, describe(hm[hp.name]))
					continue
				}
				if err := (netproxy.Rules{Hosts: map[string]string{hp.name: addr}}).Check(); err != nil {
					p.errorf(hp.val, "sandbox.network.hosts: %v", err)
					continue
				}
				rules.Hosts[hp.name] = addr
			}
		default:
			p.errorf(np.key, "unknown sandbox.network key %q (allowed: %s)", np.name, strings.Join(networkKeys, ", "))
		}
	}
	sb.Network, sb.NetworkRules = false, rules
}

// itemNodes are a sequence node's items, for errors at their own lines.
func itemNodes(n *yaml.Node) []*yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return slices.Clone(n.Content)
}

// String says the rules in one line.
func (r *NetworkRules) String() string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("proxy (%s): %d allowed, %d denied, %d hosts", r.Mode, len(r.Allow), len(r.Deny), len(r.Hosts))
}
