package sandbox

import (
	"strings"
	"testing"
)

// A host a command is let reach is one the proxy can match: a name, an
// address, a wildcard domain where wildcards are taken, with a port or
// none; anything else is refused in a sentence that names it.
func TestCheckHost(t *testing.T) {
	for _, h := range []string{"example.com", "Registry.NPMjs.org:443", "localhost", "10.0.0.1", "10.0.0.1:8080", "[::1]", "[2001:db8::1]:443", "::1", "2001:db8::1", "a-b.c0.io"} {
		if err := CheckHost(h, false); err != nil {
			t.Errorf("%q: %v", h, err)
		}
	}
	for _, h := range []string{"*.example.com", "*.example.com:8443"} {
		if err := CheckHost(h, true); err != nil {
			t.Errorf("%q with wildcards: %v", h, err)
		}
		if err := CheckHost(h, false); err == nil || !strings.Contains(err.Error(), "is not a host") {
			t.Errorf("%q without wildcards: %v", h, err)
		}
	}
	for h, want := range map[string]string{
		"":                      `"" is not a host`,
		"http://example.com":    `"http://example.com" is not a host`,
		"example.com/x":         `"example.com/x" is not a host`,
		"example.com:":          `"example.com:" is not a host`,
		"example.com:0":         `"example.com:0" has no valid port: a port is a number from 1 to 65535`,
		"example.com:65536":     `has no valid port`,
		"example.com:+80":       `is not a host`,
		"example.com:080":       `has no valid port`,
		"exa mple.com":          `is not a host`,
		"-bad.com":              `is not a host`,
		"a..b":                  `is not a host`,
		"*":                     `is not a host`,
		"*.":                    `is not a host`,
		"foo.*.com":             `is not a host`,
		"::1:":                  `is not a host`,
		"fe80::1%eth0":          `is not a host`,
		"[::1":                  `is not a host`,
		"[10.0.0.1]":            `is not a host`,
		"[::1]x":                `is not a host`,
		"1.2.3.999":             `is not a host`,
		"example.com.":          `is not a host`,
		strings.Repeat("a", 64): `is not a host`,
	} {
		err := CheckHost(h, true)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", h, err, want)
		}
	}
}
