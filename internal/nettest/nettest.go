// Package nettest holds the servers the network sandbox's end-to-end tests
// reach through the proxy: an npm registry (Registry), a git server over
// HTTPS with its own certificate authority (GitHTTPS) and a server that
// echoes what it was asked (Echo). Each listens on 127.0.0.1 at a random
// port, records every request it serves, and closes when its test ends.
// Tests reach them under made-up names (registry.test) that the sandbox's
// network.hosts maps to 127.0.0.1, so each is reached only through the
// proxy.
package nettest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// Request is one request a server saw.
type Request struct {
	Method string
	Path   string // with the query, if any
	Host   string // the Host header: the name the client asked for
}

// server is what every fixture shares: the listener's port and the log.
type server struct {
	Port int
	mu   sync.Mutex
	reqs []Request
}

// Requests returns the requests served so far, in order.
func (s *server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Saw reports whether a request with this method and path was served.
func (s *server) Saw(method, path string) bool {
	for _, r := range s.Requests() {
		if r.Method == method && r.Path == path {
			return true
		}
	}
	return false
}

// record wraps h so that every request is logged before it is served.
func (s *server) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host})
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// start serves h on 127.0.0.1, recording each request, until the test
// ends; with configure, over TLS, configure setting the certificate
// before it starts.
func (s *server) start(t testing.TB, h http.Handler, configure func(*httptest.Server)) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(s.record(h))
	if configure != nil {
		configure(ts)
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	_, port, err := net.SplitHostPort(ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s.Port, _ = strconv.Atoi(port)
	return ts
}

// EchoServer answers every request with its method and path.
type EchoServer struct{ server }

// Echo starts an EchoServer: any method, any path, the answer is
// "METHOD PATH\n" with status 200.
func Echo(t testing.TB) *EchoServer {
	t.Helper()
	e := &EchoServer{}
	e.start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(r.Method + " " + r.URL.RequestURI() + "\n"))
	}), nil)
	return e
}
