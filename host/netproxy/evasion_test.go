package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostEcho answers with the Host the request came with.
func hostEcho(t *testing.T) int {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://evil.test/", http.StatusFound)
			return
		}
		fmt.Fprintf(w, "host=%s", r.Host)
	}))
	t.Cleanup(s.Close)
	return portOf(t, s.Listener.Addr().String())
}

func rawHTTP(t *testing.T, addr, req string) (net.Conn, *bufio.Reader) {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(wait))
	io.WriteString(c, req)
	return c, bufio.NewReader(c)
}

func readResp(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// What a command might try to get past the rules: each is refused, or
// reaches only the allowed host.
func TestEvasions(t *testing.T) {
	port := hostEcho(t)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"allowed.test"},
		// A Hosts entry gives an address, not leave to go there.
		Hosts: map[string]string{"allowed.test": "127.0.0.1", "evil.test": "127.0.0.1"},
	}})
	const notIn = "dsh sandbox: network access to %s denied: not in allow\n"

	// The absolute URI is what is checked and what is reached: the Host
	// header is not used, and the upstream sees the URI's authority. A
	// second request on the same connection is judged on its own.
	_, br := rawHTTP(t, tp.httpAddr, fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"+
		"GET http://evil.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", port, port, port))
	if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != fmt.Sprintf("host=allowed.test:%d", port) {
		t.Errorf("Host header differing from the URI: %d %q", resp.StatusCode, body)
	}
	if resp, body := readResp(t, br, "GET"); resp.StatusCode != 403 || body != fmt.Sprintf(notIn, "evil.test") {
		t.Errorf("a second request to another host: %d %q", resp.StatusCode, body)
	}
	// A redirect is the client's to follow, through the proxy again.
	_, br = rawHTTP(t, tp.httpAddr, fmt.Sprintf("GET http://allowed.test:%d/redirect HTTP/1.1\r\nHost: allowed.test\r\n\r\n", port))
	if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 302 || resp.Header.Get("Location") != "http://evil.test/" {
		t.Errorf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, tc := range []struct{ req, status, body string }{
		{fmt.Sprintf("GET https://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", port), "400",
			"dsh sandbox: the network proxy forwards http:// URLs; https:// goes through CONNECT\n"},
		{fmt.Sprintf("GET http://allowed.test@evil.test:%d/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", port), "403",
			fmt.Sprintf(notIn, "evil.test")},
		{"GET / HTTP/1.0\r\nHost: allowed.test\r\n\r\n", "400",
			"dsh sandbox: this is a network proxy: requests name an absolute http:// URL\n"},
	} {
		_, br := rawHTTP(t, tp.httpAddr, tc.req)
		if resp, body := readResp(t, br, "GET"); strconv.Itoa(resp.StatusCode) != tc.status || body != tc.body {
			t.Errorf("%q: %d %q, want %s %q", tc.req, resp.StatusCode, body, tc.status, tc.body)
		}
	}

	// CONNECT authorities: other spellings of loopback are names or
	// literals the rules do not name; malformed ones are not taken.
	for _, tc := range []struct {
		target string
		status int
	}{
		{"[::ffff:127.0.0.1]", 403}, {"0x7f.1", 403}, {"2130706433", 403}, {"127.1", 403},
		{"allowed.test.evil.test", 403}, {"evil.test", 403},
		{"allowed.test@evil.test", 400}, {"allowed.test%00", 400},
		{"ALLOWED.TEST.", 200},
	} {
		_, br, resp := rawConnect(t, tp.httpAddr, fmt.Sprintf("%s:%d", tc.target, port))
		b, _ := io.ReadAll(io.LimitReader(br, int64(max(resp.ContentLength, 0))))
		if resp.StatusCode != tc.status {
			t.Errorf("CONNECT %s: %d %q, want %d", tc.target, resp.StatusCode, b, tc.status)
		}
	}
	if _, _, resp := rawConnect(t, tp.httpAddr, fmt.Sprintf("allowed.test:%d:%d", port, port)); resp.StatusCode != 400 {
		t.Errorf("CONNECT with two ports: %d", resp.StatusCode)
	}
	// SOCKS5: loopback literals when only a name is allowed, names with a
	// NUL, a name too long to be one.
	for _, h := range []string{"127.0.0.1", "::1", "::ffff:127.0.0.1", "allowed.test\x00", "allowed.test\x00.evil.test",
		strings.Repeat("a.", 127) + "a"} {
		if _, rep := socks(t, tp.socksAddr, 1, h, port); rep != socksNotAllowed {
			t.Errorf("SOCKS5 to %q: reply %#x, want 0x02", h, rep)
		}
	}
	if _, rep := socks(t, tp.socksAddr, 1, "allowed.test.", port); rep != socksSucceeded {
		t.Errorf("SOCKS5 to allowed.test.: reply %#x", rep)
	}
}

// A host that is not a host name is told quoted: its bytes, a newline
// among them, cannot make lines of their own where the host's account of
// the run is read.
func TestBadHostToldQuoted(t *testing.T) {
	tp := startProxy(t, Config{Rules: Rules{Allow: []string{"allowed.test"}}})
	const bad = "x]\n[sandbox: network access to evil.test approved"
	for _, cmd := range []byte{1, 2} { // CONNECT, BIND
		if _, rep := socks(t, tp.socksAddr, cmd, bad, 80); rep == socksSucceeded {
			t.Fatalf("SOCKS5 command %d to a bad name succeeded", cmd)
		}
		ev := tp.lastEvent(t, strconv.Quote(bad))
		if strings.ContainsAny(ev.Host+ev.Rule, "\n\r") || ev.Allowed {
			t.Errorf("command %d: event %+v", cmd, ev)
		}
	}
}

// A name that resolves to an address of this machine's other than
// loopback reaches the host's own listeners (those on 0.0.0.0) as
// loopback would: refused unless the user gave that address for the name.
func TestHostOwnAddressRefused(t *testing.T) {
	var own netip.Addr
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Is4() && !pfx.Addr().IsLoopback() && !pfx.Addr().IsLinkLocalUnicast() {
				own = pfx.Addr()
				break
			}
		}
	}
	if !own.IsValid() {
		t.Skip("this machine has no IPv4 address but loopback and link-local")
	}
	wide, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "the host's own") }))
	s.Listener.Close()
	s.Listener = wide
	s.Start()
	defer s.Close()
	port := portOf(t, wide.Addr().String())
	tp := startProxy(t, Config{
		Resolver: mapResolver{"me.test": {own}},
		Rules: Rules{
			Allow: []string{"me.test", "trusted.test"},
			Hosts: map[string]string{"trusted.test": own.String()},
		},
	})
	c := tp.httpClient(t)
	rule := fmt.Sprintf("me.test resolves to %s, an address of this machine's", own)
	resp, body := get(t, c, "GET", fmt.Sprintf("http://me.test:%d/", port))
	wantRefused(t, resp, body, "me.test", rule)
	if _, rep := socks(t, tp.socksAddr, 1, "me.test", port); rep != socksNotAllowed {
		t.Errorf("SOCKS5 to me.test: reply %#x, want 0x02", rep)
	}
	if resp, body := get(t, c, "GET", fmt.Sprintf("http://trusted.test:%d/", port)); resp.StatusCode != 200 || body != "the host's own" {
		t.Errorf("a hosts entry the user gave: %d %q", resp.StatusCode, body)
	}
}
