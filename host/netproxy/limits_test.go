package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A GET, HEAD or OPTIONS with a body sends what limited mode is there to
// keep in: refused like the methods that send, whether the body has a
// length or comes chunked.
func TestLimitedModeRefusesBodies(t *testing.T) {
	_, port := backend(t, false)
	tp := startProxy(t, Config{Rules: Rules{
		Mode:  "limited",
		Allow: []string{"api.test"},
		Hosts: map[string]string{"api.test": "127.0.0.1"},
	}})
	const rule = "limited mode sends no request body"
	for _, tc := range []struct{ name, head, body string }{
		{"length", "Content-Length: 6\r\n", "secret"},
		{"chunked", "Transfer-Encoding: chunked\r\n", "6\r\nsecret\r\n0\r\n\r\n"},
	} {
		for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
			_, br := rawHTTP(t, tp.httpAddr, fmt.Sprintf("%s http://api.test:%d/b HTTP/1.1\r\nHost: api.test\r\n%s\r\n%s", m, port, tc.head, tc.body))
			resp, body := readResp(t, br, m)
			if m == "HEAD" {
				body = "dsh sandbox: network access to api.test denied: " + rule + "\n" // no body to a HEAD
			}
			wantRefused(t, resp, body, "api.test", rule)
			if ev := tp.eventOf(t, "api.test", m); ev.Allowed || ev.Rule != rule {
				t.Errorf("%s with a body (%s): event %+v", m, tc.name, ev)
			}
		}
	}
	// Without a body, and with an empty one, it goes through.
	for _, head := range []string{"", "Content-Length: 0\r\n"} {
		_, br := rawHTTP(t, tp.httpAddr, fmt.Sprintf("GET http://api.test:%d/b HTTP/1.1\r\nHost: api.test\r\n%s\r\n", port, head))
		if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != "hello GET /b " {
			t.Errorf("GET %q: %d %q", head, resp.StatusCode, body)
		}
	}
	// Methods in lower case are other methods.
	_, br := rawHTTP(t, tp.httpAddr, fmt.Sprintf("get http://api.test:%d/b HTTP/1.1\r\nHost: api.test\r\n\r\n", port))
	resp, body := readResp(t, br, "get")
	wantRefused(t, resp, body, "api.test", "limited mode allows only GET, HEAD and OPTIONS")
}

// A command cannot take the host's descriptors by opening connections to
// the proxy: past maxConns at once, HTTP and SOCKS5 together, a new one
// waits until another ends.
func TestConnectionLimit(t *testing.T) {
	old := maxConns
	maxConns = 4
	defer func() { maxConns = old }()
	_, port := backend(t, false)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"api.test"},
		Hosts: map[string]string{"api.test": "127.0.0.1"},
	}})
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.DialTimeout("tcp", tp.socksAddr, wait)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	c, err := net.DialTimeout("tcp", tp.httpAddr, wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held = append(held, c)
	// Each held connection is the proxy's once it answers.
	for _, c := range held[:3] {
		c.SetDeadline(time.Now().Add(wait))
		c.Write([]byte{5, 1, 0})
		var sel [2]byte
		if _, err := io.ReadFull(c, sel[:]); err != nil {
			t.Fatalf("SOCKS5 greeting under the limit: %v", err)
		}
	}

	// The fifth waits.
	late, err := net.DialTimeout("tcp", tp.httpAddr, wait)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	fmt.Fprintf(late, "GET http://api.test:%d/late HTTP/1.1\r\nHost: api.test\r\n\r\n", port)
	late.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var b [1]byte
	if n, err := late.Read(b[:]); n > 0 || err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a connection past the limit was served: %d bytes, %v", n, err)
	}
	// One ends: the fifth is served.
	held[0].Close()
	late.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 512)
	n, err := io.ReadAtLeast(late, buf, 12)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
		t.Fatalf("the waiting connection after one ended: %q, %v", buf[:n], err)
	}
}

// An upstream's answer head is bounded as a client's request head is: the
// host keeps no more than a megabyte of it per request.
func TestUpstreamHeadBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(wait))
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: ")
		chunk := strings.Repeat("a", 64<<10)
		for i := 0; i < 32; i++ { // 2 MiB
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
		io.WriteString(c, "\r\nContent-Length: 0\r\n\r\n")
	}()
	defer func() { l.Close(); <-done }()
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"big.test"},
		Hosts: map[string]string{"big.test": "127.0.0.1"},
	}})
	resp, body := get(t, tp.httpClient(t), "GET", fmt.Sprintf("http://big.test:%d/", portOf(t, l.Addr().String())))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "dsh sandbox: cannot reach big.test") {
		t.Errorf("a 2 MiB answer head: %d, %d bytes of body %.200q", resp.StatusCode, len(body), body)
	}
}

// A request head past maxHeadBytes is refused before anything is dialed:
// each of maxConns clients may hold that much of the host's memory.
func TestRequestHeadBounded(t *testing.T) {
	_, port := backend(t, false)
	tp := startProxy(t, Config{Rules: Rules{
		Allow: []string{"api.test"},
		Hosts: map[string]string{"api.test": "127.0.0.1"},
	}})
	big := strings.Repeat("a", maxHeadBytes+(8<<10))
	_, br := rawHTTP(t, tp.httpAddr, fmt.Sprintf("GET http://api.test:%d/ HTTP/1.1\r\nHost: api.test\r\nX-Big: %s\r\n\r\n", port, big))
	if resp, _ := readResp(t, br, "GET"); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a request head of %d bytes: %d", len(big), resp.StatusCode)
	}
	// The server lingers half a second after refusing a head (so that
	// the client reads the answer before a reset): wait it out for goleak.
	defer func() {
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			buf := make([]byte, 1<<20)
			if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "closeWriteAndWait") {
				return
			}
		}
	}()
	ok := strings.Repeat("a", 32<<10)
	_, br = rawHTTP(t, tp.httpAddr, fmt.Sprintf("GET http://api.test:%d/ HTTP/1.1\r\nHost: api.test\r\nX-Big: %s\r\n\r\n", port, ok))
	if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 200 {
		t.Errorf("a request head of %d bytes: %d", len(ok), resp.StatusCode)
	}
}
