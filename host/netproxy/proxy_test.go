package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAllowedGET(t *testing.T) {
	_, port := backend(t, false)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"api.test"},
		Hosts: map[string]string{"api.test": "127.0.0.1"},
	}})
	u := fmt.Sprintf("http://api.test:%d/x", port)

	resp, body := get(t, tp.httpClient(t), "GET", u)
	if resp.StatusCode != 200 || body != "hello GET /x " {
		t.Fatalf("Go client: %d %q", resp.StatusCode, body)
	}
	ev := tp.lastEvent(t, "api.test")
	want := Event{Owner: "tester", Host: "api.test", Port: port, Method: "GET", Allowed: true,
		Rule: `allowed by allow "api.test"`, Addr: "127.0.0.1:" + strconv.Itoa(port), Bytes: int64(len(body))}
	ev.Time = time.Time{}
	if ev != want {
		t.Errorf("event %+v, want %+v", ev, want)
	}

	out, errs, code := curl(t, "-x", "http://"+tp.httpAddr, u)
	if code != 0 || out != "hello GET /x " {
		t.Fatalf("curl: exit %d, out %q, err %q", code, out, errs)
	}
}

func TestDeniedName(t *testing.T) {
	_, port := backend(t, false)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"api.test"},
		Hosts: map[string]string{"api.test": "127.0.0.1", "other.test": "127.0.0.1"},
	}})
	c := tp.httpClient(t)
	resp, body := get(t, c, "GET", fmt.Sprintf("http://other.test:%d/", port))
	wantRefused(t, resp, body, "other.test", "not in allow")
	ev := tp.lastEvent(t, "other.test")
	if ev.Allowed || ev.Rule != "not in allow" || ev.Addr != "" || ev.Method != "GET" || ev.Port != port {
		t.Errorf("event %+v", ev)
	}

	out, errs, code := curl(t, "-i", "-x", "http://"+tp.httpAddr, fmt.Sprintf("http://other.test:%d/", port))
	if code != 0 || !strings.HasPrefix(out, "HTTP/1.1 403") || !strings.Contains(out, "X-Dsh-Denied: not in allow\r\n") ||
		!strings.HasSuffix(out, "dsh sandbox: network access to other.test denied: not in allow\n") {
		t.Errorf("curl: exit %d, out %q, err %q", code, out, errs)
	}
}

func TestDenyWinsWildcardAndPort(t *testing.T) {
	_, port := backend(t, false)
	_, port2 := backend(t, false)
	hosts := map[string]string{}
	for _, h := range []string{"good.corp.test", "bad.corp.test", "x.test", "a.x.test", "a.b.x.test", "port.test"} {
		hosts[h] = "127.0.0.1"
	}
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"*.corp.test", "*.x.test", "port.test:" + strconv.Itoa(port)},
		Deny:  []string{"bad.corp.test"},
		Hosts: hosts,
	}})
	c := tp.httpClient(t)
	for _, tc := range []struct {
		host string
		port int
		rule string // "" when allowed
	}{
		{"good.corp.test", port, ""},
		{"bad.corp.test", port, `denied by deny "bad.corp.test"`},
		{"a.x.test", port, ""},
		{"a.b.x.test", port, ""},
		{"x.test", port, "not in allow"},
		{"port.test", port, ""},
		{"port.test", port2, "not in allow"},
	} {
		resp, body := get(t, c, "GET", fmt.Sprintf("http://%s:%d/p", tc.host, tc.port))
		if tc.rule == "" {
			if resp.StatusCode != 200 || body != "hello GET /p " {
				t.Errorf("%s:%d: %d %q, want allowed", tc.host, tc.port, resp.StatusCode, body)
			}
			continue
		}
		wantRefused(t, resp, body, tc.host, tc.rule)
	}
}

func TestConnectTLS(t *testing.T) {
	_, port := backend(t, true)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"secure.test"},
		Hosts: map[string]string{"secure.test": "127.0.0.1", "evil.test": "127.0.0.1"},
	}})
	u := fmt.Sprintf("https://secure.test:%d/s", port)
	out, errs, code := curl(t, "-k", "-x", "http://"+tp.httpAddr, u)
	if code != 0 || out != "hello GET /s " {
		t.Fatalf("curl: exit %d, out %q, err %q", code, out, errs)
	}
	ev := tp.lastEvent(t, "secure.test")
	if !ev.Allowed || ev.Method != "CONNECT" || ev.Addr != "127.0.0.1:"+strconv.Itoa(port) || ev.Bytes < 1000 {
		t.Errorf("event %+v: want an allowed CONNECT with the TLS handshake's bytes", ev)
	}

	resp, body := get(t, tp.httpClient(t), "POST", u)
	if resp.StatusCode != 200 || body != "hello POST /s " {
		t.Errorf("Go client: %d %q", resp.StatusCode, body)
	}

	// A refused CONNECT is a 403 that names the rule, too.
	_, br, resp := rawConnect(t, tp.httpAddr, fmt.Sprintf("evil.test:%d", port))
	b, _ := io.ReadAll(io.LimitReader(br, int64(max(resp.ContentLength, 0))))
	wantRefused(t, resp, string(b), "evil.test", "not in allow")
	if ev := tp.eventOf(t, "evil.test", "CONNECT"); ev.Allowed {
		t.Errorf("event %+v", ev)
	}
	_, errs, code = curl(t, "-k", "-x", "http://"+tp.httpAddr, fmt.Sprintf("https://evil.test:%d/", port))
	if code == 0 || !strings.Contains(errs, "403") {
		t.Errorf("curl to a refused https host: exit %d, err %q", code, errs)
	}
}

func TestSOCKS(t *testing.T) {
	_, port := backend(t, false)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"api.test", "127.0.0.1:" + strconv.Itoa(port)},
		Hosts: map[string]string{"api.test": "127.0.0.1", "other.test": "127.0.0.1"},
	}})
	out, errs, code := curl(t, "--socks5-hostname", tp.socksAddr, fmt.Sprintf("http://api.test:%d/k", port))
	if code != 0 || out != "hello GET /k " {
		t.Fatalf("curl --socks5-hostname: exit %d, out %q, err %q", code, out, errs)
	}
	ev := tp.lastEvent(t, "api.test")
	if !ev.Allowed || ev.Method != "SOCKS5" || ev.Bytes == 0 || ev.Addr != "127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("event %+v", ev)
	}
	// An IPv4 address, which curl --socks5 sends as such.
	out, errs, code = curl(t, "--socks5", tp.socksAddr, fmt.Sprintf("http://127.0.0.1:%d/v4", port))
	if code != 0 || out != "hello GET /v4 " {
		t.Fatalf("curl --socks5 to an IP: exit %d, out %q, err %q", code, out, errs)
	}

	if _, rep := socks(t, tp.socksAddr, 1, "other.test", port); rep != socksNotAllowed {
		t.Errorf("refused name: reply %#x, want 0x02", rep)
	}
	if ev := tp.lastEvent(t, "other.test"); ev.Allowed || ev.Rule != "not in allow" {
		t.Errorf("event %+v", ev)
	}
	if _, rep := socks(t, tp.socksAddr, 2, "api.test", port); rep != socksCmdNotSupported {
		t.Errorf("BIND: reply %#x, want 0x07", rep)
	}
	if _, rep := socks(t, tp.socksAddr, 3, "api.test", port); rep != socksCmdNotSupported {
		t.Errorf("UDP ASSOCIATE: reply %#x, want 0x07", rep)
	}
	if ev := tp.lastEvent(t, "api.test"); ev.Allowed || !strings.Contains(ev.Rule, "UDP ASSOCIATE is not supported") {
		t.Errorf("event %+v", ev)
	}
	_, errs, code = curl(t, "--socks5-hostname", tp.socksAddr, fmt.Sprintf("http://other.test:%d/", port))
	if code == 0 || !strings.Contains(errs, "other.test. (2)") { // curl names the reply code
		t.Errorf("curl through SOCKS5 to a refused name: exit %d, err %q", code, errs)
	}
}

func TestLimitedMode(t *testing.T) {
	_, port := backend(t, false)
	_, tlsPort := backend(t, true)
	tp := startProxy(t, Config{Rules: Rules{
		Mode:  "limited",
		Allow: []string{"api.test"},
		Hosts: map[string]string{"api.test": "127.0.0.1"},
	}})
	c := tp.httpClient(t)
	u := fmt.Sprintf("http://api.test:%d/l", port)
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		if resp, _ := get(t, c, m, u); resp.StatusCode != 200 {
			t.Errorf("%s in limited mode: %d", m, resp.StatusCode)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		resp, body := get(t, c, m, u)
		wantRefused(t, resp, body, "api.test", "limited mode allows only GET, HEAD and OPTIONS")
	}
	if ev := tp.eventOf(t, "api.test", "DELETE"); ev.Allowed {
		t.Errorf("event %+v", ev)
	}
	const tunnelRule = "limited mode cannot see inside an encrypted tunnel"
	_, br, resp := rawConnect(t, tp.httpAddr, fmt.Sprintf("api.test:%d", tlsPort))
	b, _ := io.ReadAll(io.LimitReader(br, int64(max(resp.ContentLength, 0))))
	wantRefused(t, resp, string(b), "api.test", tunnelRule)
	if _, rep := socks(t, tp.socksAddr, 1, "api.test", port); rep != socksNotAllowed {
		t.Errorf("SOCKS5 in limited mode: reply %#x, want 0x02", rep)
	}
	if ev := tp.eventOf(t, "api.test", "SOCKS5"); ev.Allowed || ev.Rule != tunnelRule {
		t.Errorf("event %+v", ev)
	}
	out, errs, code := curl(t, "-X", "POST", "-d", "x", "-i", "-x", "http://"+tp.httpAddr, u)
	if code != 0 || !strings.HasPrefix(out, "HTTP/1.1 403") || !strings.Contains(out, "limited mode allows only GET, HEAD and OPTIONS") {
		t.Errorf("curl POST: exit %d, out %q, err %q", code, out, errs)
	}
}

func TestAddressChecks(t *testing.T) {
	_, port := backend(t, false)
	ps := strconv.Itoa(port)
	// An address of this machine's that is not loopback, if it has one: a
	// name that resolves to a refused address and then to it reaches it.
	var outside netip.Addr
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Is4() && refusedAddr(pfx.Addr(), false) == "" {
				outside = pfx.Addr()
				break
			}
		}
	}
	res := mapResolver{
		"rebind.test": {netip.MustParseAddr("127.0.0.1")},
		"mapped.test": {netip.MustParseAddr("::ffff:127.0.0.1")},
		"meta2.test":  {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")},
		"denied.test": {netip.MustParseAddr("10.9.9.9")},
	}
	if outside.IsValid() {
		res["multi.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1"), outside}
		// outside stands for another machine's address here
		// (TestHostOwnAddressRefused has it as this machine's).
		old := ownAddrs
		ownAddrs = func() map[netip.Addr]bool { return map[netip.Addr]bool{} }
		defer func() { ownAddrs = old }()
	}
	tp := startProxy(t, Config{
		Resolver: res,
		Rules: Rules{
			Allow: []string{"rebind.test", "mapped.test", "meta2.test", "meta.test", "multi.test", "localhost",
				"denied.test", "nowhere.test", "127.0.0.1:" + ps, "169.254.169.254", "[::ffff:127.0.0.1]:1"},
			Deny:  []string{"10.9.9.9"},
			Hosts: map[string]string{"meta.test": "169.254.169.254"},
		},
	})
	c := tp.httpClient(t)
	for _, tc := range []struct{ host, rule string }{
		{"rebind.test", "rebind.test resolves to 127.0.0.1, a loopback address"},
		{"mapped.test", "mapped.test resolves to ::ffff:127.0.0.1, a loopback address"},
		{"meta.test", "meta.test resolves to 169.254.169.254, a cloud metadata address"},
		{"meta2.test", "meta2.test resolves to 169.254.169.254, a cloud metadata address"},
		{"denied.test", `denied.test resolves to 10.9.9.9, denied by deny "10.9.9.9"`},
		{"[::ffff:127.0.0.1]", "not in allow"},
		{"169.254.169.254", "169.254.169.254 is a cloud metadata address"}, // named literally, still refused
	} {
		resp, body := get(t, c, "GET", fmt.Sprintf("http://%s:%d/", tc.host, port))
		h := strings.Trim(tc.host, "[]")
		wantRefused(t, resp, body, h, tc.rule)
		if ev := tp.lastEvent(t, h); ev.Allowed || ev.Rule != tc.rule || ev.Addr != "" {
			t.Errorf("event %+v, want refused by %q", ev, tc.rule)
		}
		// The same rule over CONNECT and SOCKS5.
		_, br, resp := rawConnect(t, tp.httpAddr, net.JoinHostPort(h, ps))
		b, _ := io.ReadAll(io.LimitReader(br, int64(max(resp.ContentLength, 0))))
		wantRefused(t, resp, string(b), h, tc.rule)
		if _, rep := socks(t, tp.socksAddr, 1, h, port); rep != socksNotAllowed {
			t.Errorf("SOCKS5 to %s: reply %#x, want 0x02", h, rep)
		}
	}

	// localhost, allowed by name, resolved by the default resolver from
	// /etc/hosts: a loopback address.
	tpDefault := startProxy(t, Config{Rules: Rules{Allow: []string{"localhost"}}})
	resp, body := get(t, tpDefault.httpClient(t), "GET", fmt.Sprintf("http://localhost:%d/", port))
	rule := resp.Header.Get("X-Dsh-Denied")
	if resp.StatusCode != 403 || !strings.HasPrefix(rule, "localhost resolves to ") || !strings.HasSuffix(rule, ", a loopback address") {
		t.Errorf("localhost: %d %q %q", resp.StatusCode, rule, body)
	}

	// An IP literal an Allow entry names reaches loopback.
	resp, body = get(t, c, "GET", fmt.Sprintf("http://127.0.0.1:%d/lit", port))
	if resp.StatusCode != 200 || body != "hello GET /lit " {
		t.Errorf("allowed literal: %d %q", resp.StatusCode, body)
	}
	if _, rep := socks(t, tp.socksAddr, 1, "127.0.0.1", port); rep != socksSucceeded {
		t.Errorf("SOCKS5 to an allowed literal: %#x", rep)
	}

	if outside.IsValid() {
		l, err := net.Listen("tcp", net.JoinHostPort(outside.String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "outside") }))
		s.Listener.Close()
		s.Listener = l
		s.Start()
		defer s.Close()
		op := portOf(t, l.Addr().String())
		resp, body := get(t, c, "GET", fmt.Sprintf("http://multi.test:%d/", op))
		if resp.StatusCode != 200 || body != "outside" {
			t.Errorf("multi.test: %d %q", resp.StatusCode, body)
		}
		if ev := tp.lastEvent(t, "multi.test"); ev.Addr != net.JoinHostPort(outside.String(), strconv.Itoa(op)) {
			t.Errorf("multi.test reached %q, want %s", ev.Addr, outside)
		}
	} else {
		t.Log("no address but loopback here: a name with a refused and an acceptable address is not tried")
	}
}

func TestFailures(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := portOf(t, l.Addr().String())
	l.Close() // nothing listens there now
	tp := startProxy(t, Config{
		Resolver: mapResolver{},
		Rules: Rules{
			Allow: []string{"nowhere.test", "closed.test"},
			Hosts: map[string]string{"closed.test": "127.0.0.1"},
		},
	})
	c := tp.httpClient(t)
	resp, body := get(t, c, "GET", "http://nowhere.test/")
	if resp.StatusCode != 502 || body != "dsh sandbox: cannot reach nowhere.test: cannot resolve nowhere.test: no such host\n" {
		t.Errorf("unresolvable: %d %q", resp.StatusCode, body)
	}
	if ev := tp.lastEvent(t, "nowhere.test"); !ev.Allowed || ev.Err != "cannot resolve nowhere.test: no such host" {
		t.Errorf("event %+v", ev)
	}
	resp, body = get(t, c, "GET", fmt.Sprintf("http://closed.test:%d/", closedPort))
	if resp.StatusCode != 502 || !strings.Contains(body, "connection refused") {
		t.Errorf("refused dial: %d %q", resp.StatusCode, body)
	}
	if _, rep := socks(t, tp.socksAddr, 1, "nowhere.test", 80); rep != socksHostUnreachable {
		t.Errorf("SOCKS5 unresolvable: %#x, want 0x04", rep)
	}
	if _, rep := socks(t, tp.socksAddr, 1, "closed.test", closedPort); rep != socksConnRefused {
		t.Errorf("SOCKS5 refused dial: %#x, want 0x05", rep)
	}
	if ev := tp.lastEvent(t, "closed.test"); !ev.Allowed || !strings.Contains(ev.Err, "connection refused") {
		t.Errorf("event %+v", ev)
	}
}

func TestHeadersKeepAliveStreaming(t *testing.T) {
	release := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range r.Header {
			w.Header()["X-Got-"+k] = v
		}
		if r.URL.Path != "/stream" {
			io.WriteString(w, "ok")
			return
		}
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(wait):
		}
		io.WriteString(w, "second\n")
	}))
	defer s.Close()
	port := portOf(t, s.Listener.Addr().String())
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"api.test"},
		Hosts: map[string]string{"api.test": "127.0.0.1"},
	}})
	u := fmt.Sprintf("http://api.test:%d/", port)

	out, errs, code := curl(t, "-i", "-x", "http://"+tp.httpAddr,
		"--proxy-header", "Proxy-Authorization: Basic c2VjcmV0", "--proxy-header", "Proxy-Connection: keep-alive",
		"-H", "Connection: X-Private", "-H", "X-Private: 1", "-H", "X-Kept: 1", u)
	if code != 0 {
		t.Fatalf("curl: exit %d, err %q", code, errs)
	}
	for _, gone := range []string{"X-Got-Proxy-Authorization", "X-Got-Proxy-Connection", "X-Got-X-Private", "X-Got-Connection"} {
		if strings.Contains(out, gone+":") {
			t.Errorf("the server got %s: %q", strings.TrimPrefix(gone, "X-Got-"), out)
		}
	}
	if !strings.Contains(out, "X-Got-X-Kept: 1") {
		t.Errorf("an end-to-end header was lost: %q", out)
	}

	// No protocol switch over plain HTTP: the server never sees the Upgrade.
	out, errs, code = curl(t, "-i", "-x", "http://"+tp.httpAddr,
		"-H", "Connection: Upgrade", "-H", "Upgrade: websocket", u)
	if code != 0 || !strings.HasPrefix(out, "HTTP/1.1 200") || strings.Contains(out, "X-Got-Upgrade") {
		t.Errorf("curl with Upgrade: exit %d, out %q, err %q", code, out, errs)
	}

	// Keep-alive: the second request goes over the first's connection.
	c := tp.httpClient(t)
	var reused []bool
	for range 2 {
		req, _ := http.NewRequest("GET", u, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) },
		}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if len(reused) != 2 || !reused[1] {
		t.Errorf("client connection reuse %v, want the second reused", reused)
	}

	// Streaming: the first chunk arrives while the server still holds the rest.
	resp, err := c.Get(u + "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make(chan string, 1)
	br := bufio.NewReader(resp.Body)
	go func() { l, _ := br.ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		if l != "first\n" {
			t.Errorf("first line %q", l)
		}
	case <-time.After(wait):
		t.Fatal("the first chunk did not come through before the body ended: buffered")
	}
	close(release)
	if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
		t.Errorf("rest %q", rest)
	}
}

func TestMarkSince(t *testing.T) {
	_, port := backend(t, false)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"api.test"},
		Hosts: map[string]string{"api.test": "127.0.0.1", "no.test": "127.0.0.1"},
	}})
	c := tp.httpClient(t)
	get(t, c, "GET", fmt.Sprintf("http://api.test:%d/", port))
	m := tp.Mark()
	get(t, c, "GET", fmt.Sprintf("http://no.test:%d/", port))
	get(t, c, "HEAD", fmt.Sprintf("http://api.test:%d/", port))
	evs := tp.Since(m)
	if len(evs) != 2 || evs[0].Host != "no.test" || evs[0].Allowed || evs[1].Method != "HEAD" || !evs[1].Allowed {
		t.Fatalf("Since(mark) = %+v", evs)
	}
	if n := len(tp.Since(0)); n != 3 {
		t.Errorf("Since(0) has %d events, want 3", n)
	}
	if evs := tp.Since(tp.Mark()); len(evs) != 0 {
		t.Errorf("Since(Mark()) = %+v", evs)
	}
	// The history is bounded: the oldest go.
	for i := range 2000 {
		tp.emit(Event{Host: "h" + strconv.Itoa(i)})
	}
	evs = tp.Since(m)
	if len(evs) != historySize || evs[0].Host != "h976" || evs[historySize-1].Host != "h1999" {
		t.Errorf("after 2000 more: %d events from %q to %q", len(evs), evs[0].Host, evs[len(evs)-1].Host)
	}
}

// echoServer echoes every connection on 127.0.0.1 until the test ends.
func echoServer(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	connsCh := make(chan net.Conn, 16)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connsCh <- c
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		close(connsCh)
		for c := range connsCh {
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
	})
	return portOf(t, l.Addr().String())
}

func echoes(t *testing.T, c io.ReadWriter, br *bufio.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	if br == nil {
		br = bufio.NewReader(c)
	}
	got, err := br.ReadString('\n')
	if err != nil || got != msg+"\n" {
		t.Fatalf("echo %q: %q, %v", msg, got, err)
	}
}

func TestCloseEndsTunnels(t *testing.T) {
	port := echoServer(t)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"echo.test"},
		Hosts: map[string]string{"echo.test": "127.0.0.1"},
	}})
	hc, br, resp := rawConnect(t, tp.httpAddr, "echo.test:"+strconv.Itoa(port))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	echoes(t, hc, br, "through CONNECT")
	sc, rep := socks(t, tp.socksAddr, 1, "echo.test", port)
	if rep != socksSucceeded {
		t.Fatalf("SOCKS5: %#x", rep)
	}
	echoes(t, sc, nil, "through SOCKS5")

	closed := make(chan error, 1)
	go func() { closed <- tp.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Close did not return")
	}
	tp.waitServed(t)
	for name, c := range map[string]net.Conn{"CONNECT": hc, "SOCKS5": sc} {
		c.SetReadDeadline(time.Now().Add(wait))
		if n, err := c.Read(make([]byte, 1)); err == nil || n != 0 || isTimeout(err) {
			t.Errorf("%s tunnel after Close: read %d, %v; want it ended", name, n, err)
		}
	}
	// Both tunnels ended and gave their events, with their bytes.
	for _, m := range []string{"CONNECT", "SOCKS5"} {
		found := false
		for _, ev := range tp.Since(0) {
			if ev.Method == m && ev.Allowed && ev.Bytes > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s event with bytes in %+v", m, tp.Since(0))
		}
	}
	// Listeners given after Close are closed and served by nobody.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := tp.ServeSOCKS(l); err != nil {
		t.Errorf("ServeSOCKS after Close: %v", err)
	}
	if _, err := l.Accept(); err == nil {
		t.Error("the listener given after Close is open")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestSilentClientDropped(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 300 * time.Millisecond
	tp := startProxy(t, Config{})
	handshakeTimeout = old
	for name, addr := range map[string]string{"HTTP": tp.httpAddr, "SOCKS5": tp.socksAddr} {
		c, err := net.DialTimeout("tcp", addr, wait)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(make([]byte, 1))
		if err != io.EOF && !isReset(err) {
			t.Errorf("%s: a silent client read %d, %v; want the proxy to hang up", name, n, err)
		}
		if el := time.Since(start); el < 250*time.Millisecond {
			t.Errorf("%s: dropped after %v, before the deadline", name, el)
		}
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

func TestIPv6(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "v6 "+r.URL.Path) }))
	s.Listener.Close()
	s.Listener = l
	s.Start()
	defer s.Close()
	port := portOf(t, l.Addr().String())
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{fmt.Sprintf("[::1]:%d", port), "six.test"},
		Hosts: map[string]string{"six.test": "::1"},
	}})
	resp, body := get(t, tp.httpClient(t), "GET", fmt.Sprintf("http://[::1]:%d/a", port))
	if resp.StatusCode != 200 || body != "v6 /a" {
		t.Errorf("http://[::1]: %d %q", resp.StatusCode, body)
	}
	c, rep := socks(t, tp.socksAddr, 1, "::1", port) // address type 4
	if rep != socksSucceeded {
		t.Fatalf("SOCKS5 to ::1: %#x", rep)
	}
	fmt.Fprintf(c, "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(wait))
	if out, _ := io.ReadAll(c); !strings.HasSuffix(string(out), "v6 /b") {
		t.Errorf("through SOCKS5 to ::1: %q", out)
	}
	out, errs, code := curl(t, "--socks5-hostname", tp.socksAddr, fmt.Sprintf("http://six.test:%d/c", port))
	if code != 0 || out != "v6 /c" {
		t.Errorf("curl to six.test: exit %d, out %q, err %q", code, out, errs)
	}
	if ev := tp.lastEvent(t, "six.test"); ev.Addr != fmt.Sprintf("[::1]:%d", port) {
		t.Errorf("event %+v", ev)
	}
}
