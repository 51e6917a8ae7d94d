package confine

import (
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/netproxy"
)

// The proxied network. A policy with its network off and proxy rules
// (Policy.NetworkRules) gives its commands a network namespace holding
// nothing but its loopback, as with the network off, in which the host
// opens two listeners: an HTTP proxy on proxyHTTP and a SOCKS5 one on
// proxySOCKS (on ::1 too where the kernel has IPv6). The sockets belong to
// the namespace they were made in, and are served from the host's: a
// command reaches the proxy over TCP on its own loopback, the proxy
// (host/netproxy) reaches what the rules allow from the host's network.
// Nothing else leaves the namespace: UDP, DNS, raw sockets and TCP to any
// other address fail inside, so a program that ignores the proxy
// variables fails closed.
//
// Each prepared confinement of a proxied policy has a namespace and a
// proxy of its own (the token names the owner and the rules): an owner's
// events are its own, and an escalated policy (another allow) another
// proxy.

// The proxy's listeners inside the namespace: fixed ports, since the
// namespace is the command's alone.
const (
	proxyHTTPPort  = 3128
	proxySOCKSPort = 1080
)

// proxyEnv is what a proxied command's environment holds: the variables
// curl, git, pip, npm, go and most HTTP clients read.
func proxyEnv() map[string]string {
	httpURL := "http://127.0.0.1:" + strconv.Itoa(proxyHTTPPort)
	socksURL := "socks5h://127.0.0.1:" + strconv.Itoa(proxySOCKSPort)
	noProxy := "localhost,127.0.0.1,::1"
	return map[string]string{
		"HTTP_PROXY": httpURL, "HTTPS_PROXY": httpURL, "http_proxy": httpURL, "https_proxy": httpURL,
		"ALL_PROXY": socksURL, "all_proxy": socksURL,
		"NO_PROXY": noProxy, "no_proxy": noProxy,
	}
}

// proxied reports whether p's commands reach the network through the
// host's proxy only.
func proxied(p *sandbox.Policy) bool {
	return p != nil && !p.GetNetwork() && p.GetNetworkRules() != nil
}

// rulesOf are p's proxy rules as the proxy takes them.
func rulesOf(p *sandbox.Policy) netproxy.Rules {
	nr := p.GetNetworkRules()
	return netproxy.Rules{
		Allow: slices.Clone(nr.GetAllow()),
		Deny:  slices.Clone(nr.GetDeny()),
		Mode:  nr.GetMode(),
		Hosts: maps.Clone(nr.GetHosts()),
	}
}

// netBox is one proxied confinement's proxy, serving the listeners made
// in its namespace.
type netBox struct {
	id      string // names it in a settle token
	owner   string
	proxy   *netproxy.Proxy
	lis     []net.Listener
	serving sync.WaitGroup
	live    atomic.Int64 // connections to the proxy not yet closed
}

// proxyListeners are the listeners of a namespace: HTTP ones first.
type proxyListeners struct{ http, socks []net.Listener }

func (l proxyListeners) close() {
	for _, x := range slices.Concat(l.http, l.socks) {
		x.Close()
	}
}

// startBox serves lis with a proxy of rules for owner; on error lis are
// closed.
func startBox(id, owner string, rules netproxy.Rules, lis proxyListeners, onEvent func(netproxy.Event)) (*netBox, error) {
	p, err := netproxy.New(netproxy.Config{Rules: rules, Owner: owner, OnEvent: onEvent})
	if err != nil {
		lis.close()
		return nil, err
	}
	b := &netBox{id: id, owner: owner, proxy: p, lis: slices.Concat(lis.http, lis.socks)}
	for _, l := range lis.http {
		b.serving.Go(func() { _ = p.ServeHTTP(countingListener{l, &b.live}) })
	}
	for _, l := range lis.socks {
		b.serving.Go(func() { _ = p.ServeSOCKS(countingListener{l, &b.live}) })
	}
	return b, nil
}

// close ends the proxy, its listeners and connections, and waits for
// them.
func (b *netBox) close() error {
	if b == nil {
		return nil
	}
	err := b.proxy.Close()
	for _, l := range b.lis {
		l.Close() // Serve closes them too; one Close before Serve began is not missed
	}
	b.serving.Wait()
	return err
}

// settleDrain bounds how long a settle waits for the connections to the
// proxy to end (a command's background process may hold one).
const settleDrain = 2 * time.Second

// historySize is how many events a netproxy.Proxy keeps.
const historySize = 1024

// settle is what the proxy reached and refused since mark, each host
// once, and the mark to settle from next. A tunnel is told when it ends,
// which may be a round trip after the command closed its end (the far
// side closes its own): without keep, the command is gone and this waits
// (bounded) until no connection to the proxy is left, so that every
// attempt of its is told; with keep, what is told later is the next
// settle's. An attempt the rules allowed
// that failed all the same (a name that does not resolve, a host that
// does not answer) is among the refused, with its error as why.
func (b *netBox) settle(mark uint64, keep bool) (reached []string, denied []*sandbox.NetworkDenial, next uint64) {
	if !keep {
		for deadline := time.Now().Add(settleDrain); b.live.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	evs := b.proxy.Since(mark)
	next = mark + uint64(len(evs))
	if len(evs) >= historySize {
		next = b.proxy.Mark() // some were lost already; so may a few more be
	}
	seenReached, seenDenied := map[string]bool{}, map[[2]string]bool{}
	for _, e := range evs {
		hp := net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
		why := e.Rule
		switch {
		case e.Allowed && e.Err == "":
			if !seenReached[hp] {
				seenReached[hp] = true
				reached = append(reached, hp)
			}
			continue
		case e.Allowed:
			why = e.Err
		}
		if k := [2]string{hp, why}; !seenDenied[k] {
			seenDenied[k] = true
			denied = append(denied, &sandbox.NetworkDenial{Host: hp, Why: why})
		}
	}
	return reached, denied, next
}

// openBox starts the proxy of rules for owner on lis.
func (r *Runner) openBox(rules netproxy.Rules, owner string, lis proxyListeners) (*netBox, error) {
	// Unguessable: a settle token names the box, and only the plugin whose
	// command it wrapped may learn what that owner's commands reached.
	id := "n" + rand.Text()
	b, err := startBox(id, owner, rules, lis, func(e netproxy.Event) {
		if f := r.onNetwork.Load(); f != nil {
			(*f)(e)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("network proxy: %w", err)
	}
	return b, nil
}

// watch is the settle part of a command wrapped now.
func (b *netBox) watch() string { return fmt.Sprintf("%s.%d", b.id, b.proxy.Mark()) }

// OnNetwork sets what is told of each connection or request a proxied
// command attempted, allowed or refused (the host logs it); it must not
// block.
func (r *Runner) OnNetwork(f func(netproxy.Event)) {
	if f == nil {
		r.onNetwork.Store(nil)
		return
	}
	r.onNetwork.Store(&f)
}

// countingListener counts the connections it accepted that are not
// closed yet: the proxy closes a client's connection after telling its
// attempt.
type countingListener struct {
	net.Listener
	live *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.live.Add(1)
	return &countedConn{Conn: c, live: l.live}, nil
}

// countedConn is an accepted connection that counts its Close, and keeps
// what the proxy's tunnels use of a TCP connection: the half close, and
// the kernel's copy where one side's type allows it.
type countedConn struct {
	net.Conn
	live   *atomic.Int64
	closed sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() { c.live.Add(-1) })
	return err
}

func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *countedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *countedConn) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := c.Conn.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, struct{ io.Reader }{c.Conn})
}
