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

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/console"
	"github.com/dshrun/dsh/host/mcpserver"
)

// listenHTTP listens on addr for what (the flag's purpose), or says in one
// sentence why it cannot.
func listenHTTP(addr, flag, what string) (net.Listener, error) {
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
		hint = "; " + flag + " takes HOST:PORT, e.g. 127.0.0.1:8765"
	}
	return nil, fmt.Errorf("cannot listen on %q for %s: %v%s", addr, what, err, hint)
}

// newConsole makes the console of h and m served on ln, and lets
// `dsh console` ask it for login URLs.
func newConsole(h *host.Host, m *mcpserver.Server, file string, ln net.Listener, token string, log hclog.Logger) (*console.Console, string) {
	c := console.New(console.Options{
		Source:   newConsoleSource(h, m, file),
		Token:    token,
		Loopback: mcpserver.IsLoopback(ln.Addr().String()),
		Logger:   log,
	})
	base := "http://" + ln.Addr().String()
	h.SetConsoleLogin(func() string { return c.LoginURL(base) })
	return c, base
}

// printConsoleLine prints where the person logs in to the console.
func printConsoleLine(stderr io.Writer, c *console.Console, base, token string) {
	if token == "" {
		fmt.Fprintf(stderr, "dsh serve: console at %s/ (no token: loopback only)\n", base)
		return
	}
	fmt.Fprintf(stderr, "dsh serve: console at %s\n", c.LoginURL(base))
}

// serveHTTP serves MCP over streamable HTTP, and the console beside it,
// on ln until ctx is done.
func serveHTTP(ctx context.Context, h *host.Host, m *mcpserver.Server, comp *composition.Composition, ln net.Listener, token string, ttl time.Duration, stderr io.Writer, log hclog.Logger) error {
	con, base := newConsole(h, m, comp.File, ln, token, log)
	principals := map[string]string{}
	if comp.Clients != nil {
		for _, t := range comp.Clients.Tokens {
			principals[t.Token] = t.Name
		}
	}
	if token == "" && len(principals) > 0 {
		fmt.Fprintf(stderr, "dsh serve: --no-auth: the %d tokens of clients.tokens are not asked for either\n", len(principals))
	}
	srv := &http.Server{
		Handler:           con.Handler(m.HTTPHandler(mcpserver.HTTPOptions{Token: token, SessionTimeout: ttl, Principals: principals})),
		ReadHeaderTimeout: 10 * time.Second,
	}
	url := base + "/"
	if token != "" {
		tokenFile := filepath.Join(h.RuntimeDir(), "http-token")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "dsh serve: MCP over streamable HTTP at %s\n  bearer token: %s\n  (also in %s, mode 0600)\n", url, token, tokenFile)
	} else {
		fmt.Fprintf(stderr, "dsh serve: MCP over streamable HTTP at %s (no token: loopback only)\n", url)
	}
	printConsoleLine(stderr, con, base, token)
	// The sessions are closed (serveWith did, after the calls were
	// answered) before the server: their streams end, and what is still
	// being written completes before it closes.
	return serveUntil(ctx, srv, ln, con, m.CloseSessions)
}

// serveConsole serves the console alone on ln until ctx is done (MCP is
// on stdio). The token file lets scripts use the API's bearer token.
func serveConsole(ctx context.Context, h *host.Host, m *mcpserver.Server, file string, ln net.Listener, token string, stderr io.Writer, log hclog.Logger) error {
	con, base := newConsole(h, m, file, ln, token, log)
	srv := &http.Server{Handler: con.Handler(nil), ReadHeaderTimeout: 10 * time.Second}
	if token != "" {
		if err := os.WriteFile(filepath.Join(h.RuntimeDir(), "console-token"), []byte(token+"\n"), 0o600); err != nil {
			return err
		}
	}
	printConsoleLine(stderr, con, base, token)
	return serveUntil(ctx, srv, ln, con, nil)
}

// serveUntil serves srv on ln until ctx is done, then ends what holds a
// stream open (before, then the console's streams, or Shutdown would wait
// for them) and shuts srv down within 2 s.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, con *console.Console, before func()) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		con.Close()
		return err
	case <-ctx.Done():
	}
	if before != nil {
		before()
	}
	con.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}
