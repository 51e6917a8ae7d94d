package netproxy

import (
	"net/netip"
	"testing"
)

func TestRulesCheck(t *testing.T) {
	for _, tc := range []struct {
		rules Rules
		err   string // "" for none
	}{
		{Rules{Allow: []string{"example.com", "*.example.com", "example.com:443", "*.Example.COM.:8080",
			"127.0.0.1:4873", "[::1]:80", "::1", "10.0.0.7", "[fd00::1]", "under_score.test"}}, ""},
		{Rules{Mode: "full"}, ""},
		{Rules{Mode: "limited"}, ""},
		{Rules{Allow: []string{"a.test", "b.test", "*."}}, `allow[2] "*.": not a domain pattern`},
		{Rules{Allow: []string{"*"}}, `allow[0] "*": not a domain pattern`},
		{Rules{Allow: []string{"a.*.test"}}, `allow[0] "a.*.test": not a domain pattern`},
		{Rules{Allow: []string{"a..test"}}, `allow[0] "a..test": not a domain pattern`},
		{Rules{Allow: []string{"http://a.test"}}, `allow[0] "http://a.test": port "//a.test" is not a number from 1 to 65535`},
		{Rules{Allow: []string{"a.test:0"}}, `allow[0] "a.test:0": port "0" is not a number from 1 to 65535`},
		{Rules{Allow: []string{"a.test:65536"}}, `allow[0] "a.test:65536": port "65536" is not a number from 1 to 65535`},
		{Rules{Allow: []string{"a.test:"}}, `allow[0] "a.test:": empty port`},
		{Rules{Deny: []string{"ok.test", "[::1"}}, `deny[1] "[::1": unclosed [`},
		{Rules{Deny: []string{"[127.0.0.1]:80"}}, `deny[0] "[127.0.0.1]:80": not an IPv6 address in brackets`},
		{Rules{Deny: []string{"fe80::1%eth0"}}, `deny[0] "fe80::1%eth0": an address with a zone`},
		{Rules{Mode: "strict"}, `mode "strict": not "full" or "limited"`},
		{Rules{Hosts: map[string]string{"api.test": "127.0.0.1", "v6.test": "::1"}}, ""},
		{Rules{Hosts: map[string]string{"api.test": "localhost"}}, `hosts "api.test": "localhost" is not an IP address`},
		{Rules{Hosts: map[string]string{"*.test": "127.0.0.1"}}, `hosts "*.test": not a host name`},
		{Rules{Hosts: map[string]string{"10.0.0.1": "127.0.0.1"}}, `hosts "10.0.0.1": not a host name`},
	} {
		err := tc.rules.Check()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err {
			t.Errorf("%+v: Check() = %q, want %q", tc.rules, got, tc.err)
		}
		if _, err := New(Config{Rules: tc.rules}); (err == nil) != (tc.err == "") {
			t.Errorf("%+v: New error %v, want %q", tc.rules, err, tc.err)
		}
	}
}

func TestRulesDecide(t *testing.T) {
	r := Rules{
		Allow: []string{"api.test", "*.x.test", "port.test:8443", "*.corp.test", "127.0.0.1:4873", "[::1]:80", "10.0.0.7"},
		Deny:  []string{"bad.corp.test", "*.evil.corp.test", "api.test:25"},
	}
	for _, tc := range []struct {
		host    string
		port    int
		allowed bool
		rule    string
	}{
		{"api.test", 80, true, `allowed by allow "api.test"`},
		{"API.Test.", 443, true, `allowed by allow "api.test"`},
		{"api.test", 25, false, `denied by deny "api.test:25"`},
		{"sub.api.test", 80, false, "not in allow"},
		{"a.x.test", 80, true, `allowed by allow "*.x.test"`},
		{"a.b.x.test", 80, true, `allowed by allow "*.x.test"`},
		{"x.test", 80, false, "not in allow"},
		{"ax.test", 80, false, "not in allow"},
		{"port.test", 8443, true, `allowed by allow "port.test:8443"`},
		{"port.test", 443, false, "not in allow"},
		{"good.corp.test", 443, true, `allowed by allow "*.corp.test"`},
		{"bad.corp.test", 443, false, `denied by deny "bad.corp.test"`},
		{"a.evil.corp.test", 443, false, `denied by deny "*.evil.corp.test"`},
		{"127.0.0.1", 4873, true, `allowed by allow "127.0.0.1:4873"`},
		{"127.0.0.1", 80, false, "not in allow"},
		{"::ffff:127.0.0.1", 4873, false, "not in allow"},
		{"[::1]", 80, true, `allowed by allow "[::1]:80"`},
		{"::1", 80, true, `allowed by allow "[::1]:80"`},
		{"::1", 81, false, "not in allow"},
		{"10.0.0.7", 22, true, `allowed by allow "10.0.0.7"`},
		{"bad name", 80, false, `"bad name" is not a host name`},
	} {
		allowed, rule := r.Decide(tc.host, tc.port)
		if allowed != tc.allowed || rule != tc.rule {
			t.Errorf("Decide(%q, %d) = %v, %q; want %v, %q", tc.host, tc.port, allowed, rule, tc.allowed, tc.rule)
		}
	}
	// A Deny entry for an IPv4 address names its IPv4-mapped IPv6 form too,
	// both ways, so that another spelling does not get past it.
	r = Rules{Allow: []string{"10.9.9.9", "[::ffff:10.8.8.8]"}, Deny: []string{"[::ffff:10.9.9.9]", "10.8.8.8"}}
	for _, tc := range []struct{ host, rule string }{
		{"10.9.9.9", `denied by deny "[::ffff:10.9.9.9]"`},
		{"::ffff:10.8.8.8", `denied by deny "10.8.8.8"`},
	} {
		if ok, rule := r.Decide(tc.host, 80); ok || rule != tc.rule {
			t.Errorf("Decide(%q) = %v, %q; want %q", tc.host, ok, rule, tc.rule)
		}
	}
	// and an address a name resolves to likewise
	c, err := Rules{Deny: []string{"[::ffff:10.9.9.9]:80"}}.compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, denied := c.deniedAddr(netip.MustParseAddr("10.9.9.9"), 80); !denied {
		t.Error("10.9.9.9 resolved is not denied by [::ffff:10.9.9.9]:80")
	}
	if _, denied := c.deniedAddr(netip.MustParseAddr("10.9.9.9"), 81); denied {
		t.Error("10.9.9.9:81 resolved is denied by [::ffff:10.9.9.9]:80")
	}
	// A name beyond ASCII in a rule is its ASCII (punycode) form, the one
	// clients ask for; a request is that form only.
	r = Rules{Allow: []string{"bücher.test", "*.BÜCHER.example:443"}}
	if err := r.Check(); err != nil {
		t.Fatalf("an IDN rule: %v", err)
	}
	for _, tc := range []struct {
		host    string
		port    int
		allowed bool
	}{
		{"xn--bcher-kva.test", 80, true}, {"a.xn--bcher-kva.example", 443, true}, {"a.xn--bcher-kva.example", 80, false},
		{"bücher.test", 80, false}, {"xn--bcher-kva.example", 443, false},
	} {
		if ok, rule := r.Decide(tc.host, tc.port); ok != tc.allowed {
			t.Errorf("Decide(%q, %d) = %v, %q", tc.host, tc.port, ok, rule)
		}
	}
	if c, err := (Rules{Hosts: map[string]string{"Bücher.test": "10.0.0.1"}}).compile(); err != nil || !c.hosts["xn--bcher-kva.test"].IsValid() {
		t.Errorf("an IDN hosts entry: %v %v", c, err)
	}
	if err := (Rules{Allow: []string{"a b.test"}}).Check(); err == nil {
		t.Error("a name with a space passed")
	}
	// A name never matches an IP-literal entry, nor an IP a name entry.
	if ok, _ := (Rules{Allow: []string{"localhost"}}).Decide("127.0.0.1", 80); ok {
		t.Error("127.0.0.1 allowed by the name localhost")
	}
}

func TestRefusedAddr(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		trusted bool
		why     string
	}{
		{"93.184.216.34", false, ""},
		{"10.1.2.3", false, ""},
		{"172.16.0.1", false, ""},
		{"192.168.1.1", false, ""},
		{"fd12::1", false, ""},
		{"2001:db8::1", false, ""},
		{"127.0.0.1", false, "a loopback address"},
		{"127.9.9.9", false, "a loopback address"},
		{"127.0.0.1", true, ""},
		{"::1", false, "a loopback address"},
		{"::ffff:127.0.0.1", false, "a loopback address"},
		{"::ffff:127.0.0.1", true, ""},
		{"169.254.1.1", false, "a link-local address"},
		{"169.254.1.1", true, ""},
		{"fe80::1", false, "a link-local address"},
		{"169.254.169.254", true, "a cloud metadata address"},
		{"::ffff:169.254.169.254", true, "a cloud metadata address"},
		{"64:ff9b::a9fe:a9fe", true, "a cloud metadata address"},
		{"64:ff9b:1::a9fe:a9fe", true, "a cloud metadata address"},       // the local-use NAT64 prefix
		{"64:ff9b:1:0:a9:fea9:fe00:0", true, "a cloud metadata address"}, // a /64 translation
		{"64:ff9b:1::7f00:1", false, "a loopback address"},
		{"64:ff9b:1::808:808", false, ""},
		{"64:ff9b:1::7f00:1", true, ""},
		{"100.64.0.1", false, ""}, // carrier-grade NAT, tailnets: reachable like the private ranges
		{"fe80::1%eth0", false, "a link-local address"},
		{"fd00:ec2::254", true, "a cloud metadata address"},
		{"100.100.100.200", true, "a cloud metadata address"},
		{"0.0.0.0", true, "an unspecified address"},
		{"0.1.2.3", true, "an unspecified address"},
		{"::", true, "an unspecified address"},
		{"224.0.0.1", true, "a multicast address"},
		{"ff02::1", true, "a multicast address"},
		{"255.255.255.255", true, "the broadcast address"},
	} {
		if got := refusedAddr(netip.MustParseAddr(tc.addr), tc.trusted); got != tc.why {
			t.Errorf("refusedAddr(%s, trusted %v) = %q, want %q", tc.addr, tc.trusted, got, tc.why)
		}
	}
}
