package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testneeds"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait of these tests: the machine may be loaded.
const wait = 20 * time.Second

// testProxy is a Proxy serving an HTTP and a SOCKS5 listener on loopback.
type testProxy struct {
	*Proxy
	httpAddr, socksAddr string
	httpDone, socksDone chan error

	mu     sync.Mutex
	events []Event // from OnEvent
}

func startProxy(t testing.TB, cfg Config) *testProxy {
	t.Helper()
	tp := &testProxy{httpDone: make(chan error, 1), socksDone: make(chan error, 1)}
	cfg.Owner = "tester"
	cfg.OnEvent = func(ev Event) {
		tp.mu.Lock()
		tp.events = append(tp.events, ev)
		tp.mu.Unlock()
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tp.Proxy = p
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.httpAddr, tp.socksAddr = hl.Addr().String(), sl.Addr().String()
	go func() { tp.httpDone <- p.ServeHTTP(hl) }()
	go func() { tp.socksDone <- p.ServeSOCKS(sl) }()
	t.Cleanup(func() {
		p.Close()
		tp.waitServed(t)
	})
	return tp
}

// waitServed checks that both Serve calls returned nil.
func (tp *testProxy) waitServed(t testing.TB) {
	t.Helper()
	for name, ch := range map[string]chan error{"ServeHTTP": tp.httpDone, "ServeSOCKS": tp.socksDone} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s returned %v after Close", name, err)
			}
			ch <- err // for a second look
		case <-time.After(wait):
			t.Errorf("%s has not returned %v after Close", name, wait)
		}
	}
}

// lastEvent returns the last event OnEvent saw, waiting for it to come
// (events of tunnels come when they end).
func (tp *testProxy) lastEvent(t testing.TB, host string) Event {
	t.Helper()
	return tp.eventOf(t, host, "")
}

// eventOf is the newest event for host of method ("" for any), waited
// for: a request's event may be emitted after its answer reached the
// client, so an earlier attempt's can come after a later one's.
func (tp *testProxy) eventOf(t testing.TB, host, method string) Event {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		tp.mu.Lock()
		for i := len(tp.events) - 1; i >= 0; i-- {
			if ev := tp.events[i]; ev.Host == host && (method == "" || ev.Method == method) {
				tp.mu.Unlock()
				return ev
			}
		}
		tp.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %s in %v", method, host, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// httpClient goes through tp's HTTP listener.
func (tp *testProxy) httpClient(t testing.TB) *http.Client {
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: tp.httpAddr}),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: wait}
}

// backend is a test server on 127.0.0.1 that answers "hello METHOD PATH"
// and shows the request headers it got as X-Got-* headers.
func backend(t testing.TB, tlsToo bool) (*httptest.Server, int) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range r.Header {
			w.Header()["X-Got-"+k] = v
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "hello %s %s %s", r.Method, r.URL.Path, body)
	})
	var s *httptest.Server
	if tlsToo {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s, portOf(t, s.Listener.Addr().String())
}

func portOf(t testing.TB, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// get fetches url through the proxy with Go's client.
func get(t testing.TB, c *http.Client, method, u string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, u, err)
	}
	return resp, string(body)
}

// curl runs curl with args and returns its stdout, stderr and exit code.
func curl(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	path := testneeds.Command(t, "curl")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append([]string{"-sS", "--max-time", "15", "--noproxy", ""}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"} // no proxy variables of the host's
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// wantRefused checks a 403 answer that names rule.
func wantRefused(t testing.TB, resp *http.Response, body, host, rule string) {
	t.Helper()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403 (body %q)", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Dsh-Denied"); got != rule {
		t.Errorf("X-Dsh-Denied %q, want %q", got, rule)
	}
	if want := "dsh sandbox: network access to " + host + " denied: " + rule + "\n"; body != want {
		t.Errorf("body %q, want %q", body, want)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
}

// rawConnect sends CONNECT target over a new connection to the HTTP
// listener and returns the connection and the answer's head.
func rawConnect(t testing.TB, proxyAddr, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(wait))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return c, br, resp
}

// socks asks the SOCKS5 listener for cmd to host:port (host a name or an IP
// literal) and returns the connection and the reply code.
func socks(t testing.TB, addr string, cmd byte, host string, port int) (net.Conn, byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		t.Fatal(err)
	}
	var sel [2]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil || sel != [2]byte{5, 0} {
		t.Fatalf("SOCKS5 method selection %v, %v", sel, err)
	}
	req := []byte{5, cmd, 0}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		b := a.As4()
		req = append(append(req, 1), b[:]...)
	} else if err == nil {
		b := a.As16()
		req = append(append(req, 4), b[:]...)
	} else {
		req = append(append(req, 3, byte(len(host))), host...)
	}
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("SOCKS5 reply: %v", err)
	}
	c.SetDeadline(time.Time{})
	return c, rep[1]
}

// mapResolver answers from a map, and fails for other names.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
