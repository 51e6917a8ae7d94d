package host

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/host/netproxy"
)

// Each attempt of a proxied command is one line of the host's log, under
// the owner whose command it was: reached, or refused with the rule (or
// the failure of an allowed one).
func TestLogNetwork(t *testing.T) {
	var buf bytes.Buffer
	h := &Host{log: hostlog.Wrap(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info}))}
	h.logNetwork(netproxy.Event{Owner: "agent-1", Host: "pkg.test", Port: 443, Method: "CONNECT", Allowed: true, Rule: `allowed by allow "pkg.test"`, Addr: "127.0.0.1:443", Bytes: 12})
	h.logNetwork(netproxy.Event{Owner: "agent-1", Host: "evil.test", Port: 80, Method: "GET", Rule: "not in allow"})
	h.logNetwork(netproxy.Event{Owner: "agent-2", Host: "gone.test", Port: 80, Method: "GET", Allowed: true, Rule: `allowed by allow "gone.test"`, Err: "cannot resolve gone.test: no such host"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for i, want := range [][]string{
		{"network reached", "owner=agent-1", "host=pkg.test", "port=443", "method=CONNECT", `rule="allowed by allow \"pkg.test\""`, "addr=127.0.0.1:443"},
		{"network refused", "owner=agent-1", "host=evil.test", "port=80", "method=GET", `rule="not in allow"`},
		{"network refused", "owner=agent-2", "host=gone.test", `error="cannot resolve gone.test: no such host"`},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d lacks %s: %s", i+1, w, lines[i])
			}
		}
	}
}
