package netproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928) replies.
const (
	socksSucceeded          = 0x00
	socksNotAllowed         = 0x02 // connection not allowed by ruleset
	socksNetUnreachable     = 0x03
	socksHostUnreachable    = 0x04
	socksConnRefused        = 0x05
	socksCmdNotSupported    = 0x07
	socksAddrTypeNotSupport = 0x08
)

// ServeSOCKS serves l as a SOCKS5 proxy: no authentication, CONNECT only, to
// an IPv4 or IPv6 address or a domain name, which the proxy resolves. BIND
// and UDP ASSOCIATE are refused with reply 0x07. It returns nil once the
// Proxy is closed.
func (p *Proxy) ServeSOCKS(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return nil
	}
	p.listeners[l] = struct{}{}
	p.mu.Unlock()
	ll := limitListener{l, p}
	var backoff time.Duration
	for {
		c, err := ll.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// out of descriptors for a moment: wait rather than spin
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if !p.enter() {
			c.Close()
			return nil
		}
		if !p.track(c) {
			p.wg.Done()
			return nil
		}
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.serveSOCKSConn(c)
		}()
	}
}

func (p *Proxy) serveSOCKSConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(p.handshake))
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil || head[0] != 5 {
		return
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		c.Write([]byte{5, 0xff}) // no acceptable method
		return
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return
	}

	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != 5 {
		return
	}
	var host string
	switch req[3] {
	case 1:
		var a [4]byte
		if _, err := io.ReadFull(c, a[:]); err != nil {
			return
		}
		host = netip.AddrFrom4(a).String()
	case 4:
		var a [16]byte
		if _, err := io.ReadFull(c, a[:]); err != nil {
			return
		}
		host = netip.AddrFrom16(a).String()
	case 3:
		var n [1]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(c, name); err != nil {
			return
		}
		host = string(name)
	default:
		socksReply(c, socksAddrTypeNotSupport)
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(c, pb[:]); err != nil {
		return
	}
	port := int(binary.BigEndian.Uint16(pb[:]))

	if req[1] != 1 {
		what := map[byte]string{2: "BIND", 3: "UDP ASSOCIATE"}[req[1]]
		if what == "" {
			what = fmt.Sprintf("command %d", req[1])
		}
		p.emit(Event{Host: toldHost(host), Port: port, Method: "SOCKS5", Time: time.Now(),
			Rule: "SOCKS5 " + what + " is not supported: only CONNECT"})
		socksReply(c, socksCmdNotSupported)
		return
	}
	ev, _, ok := p.admit("SOCKS5", host, port)
	if !ok {
		p.emit(ev) // before the reply, as the HTTP proxy does
		socksReply(c, socksNotAllowed)
		return
	}
	upstream, ap, err := p.dial(p.ctx, host, port)
	if err != nil {
		var ref *refusal
		var re *resolveError
		code := byte(socksHostUnreachable)
		switch {
		case errors.As(err, &ref):
			ev.Allowed, ev.Rule = false, ref.Rule
			code = socksNotAllowed
		case errors.As(err, &re):
			ev.Err = re.Error()
		default:
			ev.Err = reason(err)
			switch dialErrno(err) {
			case syscall.ECONNREFUSED:
				code = socksConnRefused
			case syscall.ENETUNREACH:
				code = socksNetUnreachable
			}
		}
		p.emit(ev)
		socksReply(c, code)
		return
	}
	ev.Addr = ap.String()
	if !p.track(upstream) {
		return
	}
	defer p.untrack(upstream)
	if socksReply(c, socksSucceeded) != nil {
		ev.Err = "the client went away"
		p.emit(ev)
		return
	}
	c.SetDeadline(time.Time{})
	ev.Bytes = tunnel(c, upstream)
	p.emit(ev)
}

// socksReply answers the request; the bound address is always 0.0.0.0:0, as
// the host's own addresses are none of the command's business.
func socksReply(c net.Conn, code byte) error {
	_, err := c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
	return err
}
