package sandbox

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// CheckHost says, in a sentence, why h is not a host a command may be let
// reach through the proxy beyond its rules (nil when it is): a host name
// (example.com), an IPv4 address or an IPv6 one (in brackets to take a
// port), with wildcard also *.example.com, each optionally with :port: a
// subset of what the proxy's rules take.
func CheckHost(h string, wildcard bool) error {
	if a, err := netip.ParseAddr(h); err == nil && a.Is6() && a.Zone() == "" {
		return nil // a bare IPv6 address, without a port
	}
	host, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.Index(h, "]")
		if end < 0 {
			return hostError(h, wildcard)
		}
		host, port = h[1:end], h[end+1:]
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || a.Zone() != "" {
			return hostError(h, wildcard)
		}
		if port != "" && !strings.HasPrefix(port, ":") {
			return hostError(h, wildcard)
		}
		port = strings.TrimPrefix(port, ":")
	} else if i := strings.LastIndex(h, ":"); i >= 0 {
		host, port = h[:i], h[i+1:]
		if port == "" {
			return hostError(h, wildcard)
		}
	}
	if port != "" {
		if strings.Trim(port, "0123456789") != "" {
			return hostError(h, wildcard)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("%q has no valid port: a port is a number from 1 to 65535", h)
		}
	}
	if strings.HasPrefix(h, "[") {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		return nil
	}
	name := host
	if wildcard {
		name = strings.TrimPrefix(host, "*.")
	}
	if !hostName(name) {
		return hostError(h, wildcard)
	}
	return nil
}

func hostError(h string, wildcard bool) error {
	if wildcard {
		return fmt.Errorf("%q is not a host: write a host name (example.com), *.example.com or an IP address, each optionally with :port", h)
	}
	return fmt.Errorf("%q is not a host: write a host name (example.com) or an IP address, optionally with :port", h)
}

// hostName reports whether s is a DNS name: dot-separated labels of
// letters, digits and inner hyphens, at most 63 characters each and 253 in
// all, the last not all digits.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	return strings.Trim(last, "0123456789") != ""
}
