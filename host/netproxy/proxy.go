package netproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Timeouts, variables so that tests can shorten them; New reads them.
var (
	// handshakeTimeout bounds how long a new client connection may take to
	// send its request head (HTTP) or greeting and request (SOCKS5).
	handshakeTimeout = 30 * time.Second
	// idleTimeout ends an HTTP keep-alive client connection that sends no
	// new request for this long.
	idleTimeout = 2 * time.Minute
	// dialTimeout bounds the resolution of a name and the dial of each of
	// its addresses.
	dialTimeout = 30 * time.Second
	// maxConns bounds the client connections a Proxy serves at once, HTTP
	// and SOCKS5 together: each holds descriptors of the host's (its own,
	// an upstream's), which a command must not be able to use up. More
	// wait in the listener's backlog until one ends.
	maxConns = 512
)

// maxHeadBytes bounds a request's head from a client and an answer's head
// from upstream: each of maxConns connections may hold that much (a
// quarter of http.Server's default, still far above what clients and
// servers send).
const maxHeadBytes = 256 << 10

// historySize is how many events a Proxy keeps for Since.
const historySize = 1024

// Event is one connection or request a command attempted, allowed or not.
type Event struct {
	Owner  string
	Host   string // as requested: a name or an IP literal; quoted when neither
	Port   int
	Method string // the HTTP method (GET, POST, ...), CONNECT or SOCKS5
	// Allowed is true when the rules and the address checks let the attempt
	// through; Err then says if it still failed (resolution, dial, upstream).
	Allowed bool
	Rule    string // why, in words: `allowed by allow "api.test"`, `not in allow`, ...
	Addr    string // the address reached ("127.0.0.1:4873"), if any
	Bytes   int64  // bytes carried both ways: bodies for plain HTTP, everything for tunnels
	Time    time.Time
	Err     string // a failure after the attempt was allowed, e.g. `cannot resolve api.test: ...`
}

// Resolver is what the proxy resolves names with; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Proxy.
type Config struct {
	Rules Rules
	// Owner is who the commands belong to; it is copied into every Event.
	Owner string
	// Resolver resolves names not in Rules.Hosts; nil: net.DefaultResolver.
	Resolver Resolver
	// OnEvent, if set, is called once for every allowed and refused
	// connection or request (for tunnels and plain HTTP when it ends, so that
	// Bytes is known), from the goroutine serving it: it must not block.
	OnEvent func(Event)
}

// Proxy serves the listeners it is given with the rules of its Config.
type Proxy struct {
	cfg      Config
	rules    *compiled
	resolver Resolver
	dialer   net.Dialer

	transport *http.Transport

	handshake, idle time.Duration // handshakeTimeout and idleTimeout when New ran

	ctx    context.Context // done when the Proxy is closed
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	wg        sync.WaitGroup // every goroutine of the Proxy's own, and every handler
	servers   map[*http.Server]struct{}
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{} // SOCKS clients, hijacked CONNECT clients, tunnel upstreams
	slots     chan struct{}         // one per client connection being served: maxConns

	evMu   sync.Mutex
	events [historySize]Event
	seq    uint64 // events emitted so far; event n (1-based) is events[(n-1)%historySize]
}

// New returns a Proxy for cfg, or the error of cfg.Rules.Check.
func New(cfg Config) (*Proxy, error) {
	rules, err := cfg.Rules.compile()
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		cfg:       cfg,
		rules:     rules,
		resolver:  cfg.Resolver,
		dialer:    net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second},
		servers:   map[*http.Server]struct{}{},
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
		handshake: handshakeTimeout,
		idle:      idleTimeout,
		slots:     make(chan struct{}, maxConns),
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.transport = &http.Transport{
		Proxy: nil, // never the host's own proxy settings
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			n, _ := strconv.Atoi(port)
			conn, _, err := p.dial(ctx, host, n)
			return conn, err
		},
		// The client's Accept-Encoding passes as it is, and so does the body.
		DisableCompression:  true,
		MaxIdleConnsPerHost: 16,
		MaxIdleConns:        64,
		// An answer's head is held whole: not the transport's 10 MB for
		// each of maxConns.
		MaxResponseHeaderBytes: maxHeadBytes,
		IdleConnTimeout:        90 * time.Second,
	}
	return p, nil
}

// enter registers a goroutine of the Proxy; false once it is closed.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// track registers c for Close; false (and c closed) once the Proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// Close closes every listener given to the Proxy and every live connection
// and tunnel, and returns when all of them are done. Serve* then return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	servers, listeners, conns := p.servers, p.listeners, p.conns
	p.servers, p.listeners, p.conns = nil, nil, nil
	p.mu.Unlock()

	p.cancel()
	for s := range servers {
		s.Close() // its listener and its client connections (not the hijacked ones: conns)
	}
	for l := range listeners {
		l.Close()
	}
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
	p.transport.CloseIdleConnections()
	return nil
}

// Mark returns a position in the event history, for Since.
func (p *Proxy) Mark() uint64 {
	p.evMu.Lock()
	defer p.evMu.Unlock()
	return p.seq
}

// Since returns the events emitted after mark, oldest first. The Proxy keeps
// only its last 1024 events: older ones are gone.
func (p *Proxy) Since(mark uint64) []Event {
	p.evMu.Lock()
	defer p.evMu.Unlock()
	first := mark + 1
	if p.seq >= historySize && first < p.seq-historySize+1 {
		first = p.seq - historySize + 1
	}
	var out []Event
	for n := first; n <= p.seq; n++ {
		out = append(out, p.events[(n-1)%historySize])
	}
	return out
}

func (p *Proxy) emit(ev Event) {
	ev.Owner = p.cfg.Owner
	p.evMu.Lock()
	p.seq++
	p.events[(p.seq-1)%historySize] = ev
	p.evMu.Unlock()
	if p.cfg.OnEvent != nil {
		p.cfg.OnEvent(ev)
	}
}

// admit applies the rules and the mode to an attempt, before any
// resolution: Event filled with the decision.
func (p *Proxy) admit(method, host string, port int) (Event, reqHost, bool) {
	ev := Event{Host: toldHost(host), Port: port, Method: method, Time: time.Now()}
	h, ok := normalizeHost(host)
	if !ok {
		ev.Rule = fmt.Sprintf("%q is not a host name", host)
		return ev, h, false
	}
	if port < 1 || port > 65535 {
		ev.Rule = fmt.Sprintf("port %d is not a port", port)
		return ev, h, false
	}
	ev.Allowed, ev.Rule = p.rules.decide(h, port)
	if !ev.Allowed || !p.rules.limited {
		return ev, h, ev.Allowed
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	case http.MethodConnect, "SOCKS5":
		ev.Allowed, ev.Rule = false, "limited mode cannot see inside an encrypted tunnel"
	default:
		ev.Allowed, ev.Rule = false, "limited mode allows only GET, HEAD and OPTIONS"
	}
	return ev, h, ev.Allowed
}

// toldHost is host as an Event carries it: as requested when it is a host
// name or an IP address, else quoted, so that whatever bytes a command
// sent (a newline, say) stay inside the one line that tells of them.
func toldHost(host string) string {
	if _, ok := normalizeHost(host); ok {
		return host
	}
	return strconv.Quote(host)
}

// refusal is an address the proxy will not dial: Rule says why.
type refusal struct{ Rule string }

func (r *refusal) Error() string { return r.Rule }

// resolveError is a name that could not be resolved.
type resolveError struct {
	host string
	err  error
}

func (e *resolveError) Error() string {
	var dns *net.DNSError
	if errors.As(e.err, &dns) && dns.IsNotFound {
		return fmt.Sprintf("cannot resolve %s: no such host", e.host)
	}
	return fmt.Sprintf("cannot resolve %s: %v", e.host, e.err)
}
func (e *resolveError) Unwrap() error { return e.err }

// dial resolves host (an IP literal, a Rules.Hosts name or a name for the
// Resolver), checks every address, and dials the acceptable ones in order
// until one answers: the name is never resolved again between check and
// dial. The host must already have passed admit. A refused address set
// gives a *refusal naming the first address's reason, a failed lookup a
// *resolveError.
func (p *Proxy) dial(ctx context.Context, host string, port int) (net.Conn, netip.AddrPort, error) {
	h, ok := normalizeHost(host)
	if !ok {
		return nil, netip.AddrPort{}, &refusal{fmt.Sprintf("%q is not a host name", host)}
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()

	var addrs []netip.Addr
	trusted := false
	switch a, inHosts := p.rules.hosts[h.name]; {
	case h.ip.IsValid():
		// admit let it through, so an Allow entry names it literally.
		addrs, trusted = []netip.Addr{h.ip}, true
	case inHosts:
		addrs, trusted = []netip.Addr{a}, true
	default:
		var err error
		addrs, err = p.resolver.LookupNetIP(ctx, "ip", h.name)
		if err != nil {
			return nil, netip.AddrPort{}, &resolveError{h.name, err}
		}
		if len(addrs) == 0 {
			return nil, netip.AddrPort{}, &resolveError{h.name, errors.New("no addresses")}
		}
	}
	var first string
	var lastErr error
	var own map[netip.Addr]bool // this machine's addresses, read once a name needs them
	for _, a := range addrs {
		why := refusedAddr(a, trusted)
		if why == "" && !trusted {
			if own == nil {
				own = ownAddrs()
			}
			if own[a.WithZone("").Unmap()] {
				why = "an address of this machine's"
			}
		}
		if why == "" {
			if rule, denied := p.rules.deniedAddr(a.Unmap(), port); denied {
				why = fmt.Sprintf("denied by deny %q", rule)
			}
		}
		if why != "" {
			if first == "" {
				if h.ip.IsValid() {
					first = fmt.Sprintf("%s is %s", a, why)
				} else {
					first = fmt.Sprintf("%s resolves to %s, %s", h.name, a, why)
				}
			}
			continue
		}
		ap := netip.AddrPortFrom(a, uint16(port))
		conn, err := p.dialer.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return conn, ap, nil
		}
		lastErr = err
	}
	if lastErr != nil {
		return nil, netip.AddrPort{}, lastErr
	}
	return nil, netip.AddrPort{}, &refusal{first}
}

// ownAddrs are the addresses of this machine's interfaces: the proxy
// dials from the host, so a name that resolves to one of them reaches the
// host's own listeners (those on 0.0.0.0) as loopback would. A variable,
// so that a test can give a machine's address as another's.
var ownAddrs = func() map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil {
			m[pfx.Addr().WithZone("").Unmap()] = true
		}
	}
	return m
}

// tunnel copies both ways between client and upstream until both halves
// are done or either fails, and returns the bytes carried. Between two
// *net.TCPConn, io.Copy splices in the kernel.
func tunnel(client, upstream net.Conn) int64 {
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 2)
	half := func(dst, src net.Conn) {
		n, err := io.Copy(dst, src)
		if err == nil {
			// src said EOF: pass it on, and keep the other way open.
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			} else {
				dst.Close()
			}
		} else {
			// a reset or a Close: the other way cannot go on either.
			client.Close()
			upstream.Close()
		}
		done <- result{n, err}
	}
	go half(upstream, client)
	go half(client, upstream)
	a, b := <-done, <-done
	return a.n + b.n
}

// limitListener hands on a connection only when the Proxy serves fewer
// than maxConns, HTTP and SOCKS5 together: until then the listener's loop
// waits with the one it accepted, and other clients wait in the kernel's
// backlog holding no descriptor of the host's.
type limitListener struct {
	net.Listener
	p *Proxy
}

func (l limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.p.slots <- struct{}{}:
	case <-l.p.ctx.Done():
		c.Close()
		return nil, net.ErrClosed
	}
	return &slotConn{Conn: c, release: sync.OnceFunc(func() { <-l.p.slots })}, nil
}

// slotConn gives its slot back when closed, and keeps what the tunnels use
// of a TCP connection: the half close, and the kernel's copy.
type slotConn struct {
	net.Conn
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *slotConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *slotConn) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := c.Conn.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, struct{ io.Reader }{c.Conn})
}

// dialErrno reads the errno of a failed dial, for the SOCKS reply.
func dialErrno(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// discard is the log of the HTTP servers and the reverse proxy: every
// failure they would log reaches the client and the Event instead.
var discard = log.New(io.Discard, "", 0)
