package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/mcpserver"
)

// listenHTTP listens on addr for serve --http, or says in one sentence why
// it cannot.
func listenHTTP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	var ae *net.AddrError
	var dnsErr *net.DNSError
	hint := ""
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		hint = "; another process listens there: stop it or pick another port (port 0 picks a free one)"
	case errors.As(err, &ae), errors.As(err, &dnsErr):
		hint = "; --http takes HOST:PORT, e.g. 127.0.0.1:8765"
	}
	return nil, fmt.Errorf("cannot listen on %q for MCP over HTTP: %v%s", addr, err, hint)
}

// serveHTTP serves MCP over streamable HTTP on ln until ctx is done.
func serveHTTP(ctx context.Context, h *host.Host, m *mcpserver.Server, ln net.Listener, token string, ttl time.Duration, stderr io.Writer) error {
	srv := &http.Server{
		Handler:           m.HTTPHandler(mcpserver.HTTPOptions{Token: token, SessionTimeout: ttl}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	url := "http://" + ln.Addr().String() + "/"
	if token != "" {
		tokenFile := filepath.Join(h.RuntimeDir(), "http-token")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "dsh serve: MCP over streamable HTTP at %s\n  bearer token: %s\n  (also in %s, mode 0600)\n", url, token, tokenFile)
	} else {
		fmt.Fprintf(stderr, "dsh serve: MCP over streamable HTTP at %s (no token: loopback only)\n", url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// The sessions are closed (serveWith did, after the calls were
	// answered): their streams end, and what is still being written
	// completes before the server closes.
	m.CloseSessions()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}
