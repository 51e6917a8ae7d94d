// Package console is the console: a web page for the person who runs the
// host, served beside MCP. It owns the page's HTTP side: the one-time login
// codes and the cookie sessions, the checks that keep other sites and
// rebound DNS names out (Host, Origin, CSRF header), the JSON API and its
// server-sent event streams, and the built page (dist/, embedded). What it
// shows and acts on comes from a Source: the host and its MCP server.
package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Options configures a Console.
type Options struct {
	Source Source
	// Token is the bearer token the API also takes; "" means no login at
	// all (--no-auth, which the caller allows on loopback only).
	Token string
	// Loopback says the address is bound on loopback only: then every
	// request's Host must name loopback, so a DNS name rebound to
	// 127.0.0.1 cannot reach the console from a web page.
	Loopback bool
	Logger   hclog.Logger
	// Heartbeat is how often an idle stream gets a comment, so proxies
	// and browsers keep it; 0 means 15 s.
	Heartbeat time.Duration
	// MaxStreams bounds the open event, output and terminal streams
	// together; 0 means 32.
	MaxStreams int
	now        func() time.Time
}

// Console serves the page and its API.
type Console struct {
	opts     Options
	src      Source
	auth     *auth
	mux      *http.ServeMux
	log      hclog.Logger
	noAuthCS string // the CSRF token when there is no login

	streams chan struct{}
	done    chan struct{}
	close   sync.Once
	wg      sync.WaitGroup
}

// New makes a console over opts.Source.
func New(opts Options) *Console {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 32
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	c := &Console{
		opts:     opts,
		src:      opts.Source,
		auth:     newAuth(opts.now),
		log:      opts.Logger,
		noAuthCS: randomID(),
		streams:  make(chan struct{}, opts.MaxStreams),
		done:     make(chan struct{}),
	}
	c.routes()
	return c
}

// NewCode makes a one-time login code, valid 10 minutes.
func (c *Console) NewCode() string { return c.auth.newCode() }

// LoginURL is where the person logs in on a console served at base
// (http://HOST:PORT): with a fresh one-time code, or the page itself when
// there is no login.
func (c *Console) LoginURL(base string) string {
	base = strings.TrimSuffix(base, "/")
	if c.opts.Token == "" {
		return base + "/"
	}
	return base + "/console/login?code=" + c.NewCode()
}

// Close ends every stream (the host is stopping) and waits for them;
// a server's Shutdown then has no stream left to wait for.
func (c *Console) Close() {
	c.close.Do(func() { close(c.done) })
	c.wg.Wait()
}

// Handler routes one HTTP address between the console and mcp: the page
// for a browser's GET / (Accept text/html, no MCP session), everything
// under /console/ to the console, the rest to mcp. With mcp nil the
// console is served alone and has / too. The browser's own /favicon.ico,
// which no MCP client asks for, is the console's too (else each page load
// logs MCP's 401 for it).
func (c *Console) Handler(mcp http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mcp == nil || r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, "/console/") || isPageRequest(r) || r.URL.Path == "/favicon.ico" {
			c.serve(w, r)
			return
		}
		mcp.ServeHTTP(w, r)
	})
}

// isPageRequest is a browser asking for the page at /; an MCP client's GET
// (Accept: text/event-stream) and its session's requests go on to MCP.
func isPageRequest(r *http.Request) bool {
	return r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.Contains(r.Header.Get("Accept"), "text/html") && r.Header.Get("Mcp-Session-Id") == ""
}

// The page's policy: its own scripts and styles only, nothing inline (the
// page's build makes xterm.js style itself through the CSSOM), no framing,
// no other site to talk to.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (c *Console) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if c.opts.Loopback && !loopbackHost(r.Host) {
		c.refuse(w, r, http.StatusForbidden, fmt.Sprintf("the console is served on loopback only; Host %q is not a loopback name (open it as http://127.0.0.1:PORT/)", r.Host))
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		c.refuse(w, r, http.StatusForbidden, fmt.Sprintf("requests from Origin %q are refused: only the console's own page (http://%s) may call it", o, r.Host))
		return
	}
	c.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names loopback: localhost or
// a loopback address, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// caller is who a request comes from once authenticated.
type caller struct {
	session string // the cookie's session, "" for a bearer token
	csrf    string
	bearer  bool
}

// kind says, for the log, how the caller got in (never its session id,
// which is the cookie's secret).
func (c caller) kind() string {
	switch {
	case c.bearer:
		return "bearer token"
	case c.session == "-":
		return "page (no login)"
	}
	return "page"
}

// who authenticates r: no login configured, a bearer token (the API
// only), or the session cookie.
func (c *Console) who(r *http.Request, api bool) (caller, bool) {
	if c.opts.Token == "" {
		return caller{session: "-", csrf: c.noAuthCS}, true
	}
	if api {
		if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			return caller{bearer: true}, equal(got, c.opts.Token)
		}
	}
	ck, err := r.Cookie(cookieName(r.Host))
	if err != nil {
		return caller{}, false
	}
	csrf, ok := c.auth.session(ck.Value)
	return caller{session: ck.Value, csrf: csrf}, ok
}

// refuse answers an error as the path wants it: JSON under the API, a
// short page elsewhere.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/console/api/") {
		writeError(w, code, msg)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, "dsh console: "+msg)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// actionError answers a Source's refusal: 404 for what does not exist,
// 504 when the request's time ran out, else 409 with the host's words.
func actionError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, err.Error())
	default:
		writeError(w, http.StatusConflict, err.Error())
	}
}
