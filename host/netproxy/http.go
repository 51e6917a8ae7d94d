package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ServeHTTP serves l as an HTTP proxy: absolute-form requests for http://
// URLs, forwarded with the body streamed, and CONNECT to any host and port
// the rules allow. It returns nil once the Proxy is closed.
func (p *Proxy) ServeHTTP(l net.Listener) error {
	srv := &http.Server{
		Handler:           httpHandler{p},
		ReadHeaderTimeout: p.handshake,
		MaxHeaderBytes:    maxHeadBytes,
		IdleTimeout:       p.idle,
		ErrorLog:          discard,
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return nil
	}
	p.servers[srv] = struct{}{}
	p.mu.Unlock()
	err := srv.Serve(limitListener{l, p})
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

type httpHandler struct{ p *Proxy }

func (h httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := h.p
	if !p.enter() {
		http.Error(w, "dsh sandbox: the network proxy is closed", http.StatusServiceUnavailable)
		return
	}
	defer p.wg.Done()
	if r.Method == http.MethodConnect {
		p.serveConnect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "dsh sandbox: this is a network proxy: requests name an absolute http:// URL", http.StatusBadRequest)
		return
	}
	if r.URL.Scheme != "http" {
		http.Error(w, fmt.Sprintf("dsh sandbox: the network proxy forwards http:// URLs; %s:// goes through CONNECT", r.URL.Scheme), http.StatusBadRequest)
		return
	}
	port := 80
	if s := r.URL.Port(); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			http.Error(w, fmt.Sprintf("dsh sandbox: bad port %q", s), http.StatusBadRequest)
			return
		}
		port = n
	}
	p.forward(w, r, r.URL.Hostname(), port)
}

// refuseHTTP is what a refused client sees: 403, the rule in a header and in
// the body.
func refuseHTTP(w http.ResponseWriter, host, rule string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Dsh-Denied", rule)
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "dsh sandbox: network access to %s denied: %s\n", host, rule)
}

// failHTTP answers an allowed attempt that could not reach its host.
func failHTTP(w http.ResponseWriter, host, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, "dsh sandbox: cannot reach %s: %s\n", host, reason)
}

// countingBody counts what passes through a body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	b.n.Add(int64(n))
	return n, err
}

// forward passes a plain HTTP request on through the Proxy's transport,
// whose dial resolves, checks and dials the checked address.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, host string, port int) {
	ev, _, ok := p.admit(r.Method, host, port)
	if ok && p.rules.limited && (r.ContentLength != 0 || len(r.TransferEncoding) > 0) {
		// A body is what a command would send; GET, HEAD and OPTIONS may
		// carry one as well as POST.
		ev.Allowed, ev.Rule, ok = false, "limited mode sends no request body", false
	}
	if !ok {
		// Told before the answer, so a command that has its answer finds
		// the refusal among the events.
		p.emit(ev)
		refuseHTTP(w, host, ev.Rule)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()

	var bytes atomic.Int64
	var addr atomic.Value
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { addr.Store(info.Conn.RemoteAddr().String()) },
	})
	in := r.WithContext(ctx)
	// No protocol switch over plain HTTP: what follows a 101 is a tunnel
	// the proxy could not see or end; websocket clients use CONNECT.
	in.Header.Del("Upgrade")
	if in.Body != nil && in.Body != http.NoBody {
		in.Body = countingBody{in.Body, &bytes}
	}
	var failure error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Header.Del("Proxy-Connection")
			pr.Out.Header.Del("Proxy-Authorization")
		},
		Transport:     p.transport,
		BufferPool:    bufferPool{},
		FlushInterval: 100 * time.Millisecond,
		ErrorLog:      discard,
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = countingBody{resp.Body, &bytes}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			failure = err
			var ref *refusal
			switch {
			case errors.As(err, &ref):
				refuseHTTP(w, host, ref.Rule)
			case ctx.Err() != nil:
				// the client went away or the Proxy closed: nobody reads an answer
			default:
				failHTTP(w, host, reason(err))
			}
		},
	}
	rp.ServeHTTP(w, in)
	var ref *refusal
	switch {
	case errors.As(failure, &ref):
		ev.Allowed, ev.Rule = false, ref.Rule
	case failure != nil:
		ev.Err = reason(failure)
	}
	if a, ok := addr.Load().(string); ok {
		ev.Addr = a
	}
	ev.Bytes = bytes.Load()
	p.emit(ev)
}

// reason is an error in the words a user reads: the resolution or dial
// failure without the Go operation around it.
func reason(err error) string {
	var re *resolveError
	if errors.As(err, &re) {
		return re.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		if op.Addr != nil {
			return fmt.Sprintf("%s: %v", op.Addr, op.Err)
		}
		return op.Err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

// serveConnect opens a tunnel: the rules, then the dial, then 200 and the
// bytes both ways until either side ends or the Proxy closes.
func (p *Proxy) serveConnect(w http.ResponseWriter, r *http.Request) {
	host, portText, err := net.SplitHostPort(r.Host)
	if err != nil {
		http.Error(w, fmt.Sprintf("dsh sandbox: CONNECT needs host:port, not %q", r.Host), http.StatusBadRequest)
		return
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		http.Error(w, fmt.Sprintf("dsh sandbox: bad port %q", portText), http.StatusBadRequest)
		return
	}
	ev, _, ok := p.admit(http.MethodConnect, host, port)
	if !ok {
		p.emit(ev)
		refuseHTTP(w, host, ev.Rule)
		return
	}
	upstream, ap, err := p.dial(r.Context(), host, port)
	if err != nil {
		var ref *refusal
		if errors.As(err, &ref) {
			ev.Allowed, ev.Rule = false, ref.Rule
		} else {
			ev.Err = reason(err)
		}
		p.emit(ev)
		if !ev.Allowed {
			refuseHTTP(w, host, ref.Rule)
		} else {
			failHTTP(w, host, ev.Err)
		}
		return
	}
	ev.Addr = ap.String()
	if !p.track(upstream) {
		return
	}
	defer p.untrack(upstream)
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		ev.Err = "cannot take over the client connection: " + err.Error()
		p.emit(ev)
		return
	}
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	client.SetDeadline(time.Time{}) // the server's header deadline no longer applies
	ev.Bytes = p.openTunnel(client, brw, upstream)
	p.emit(ev)
}

// openTunnel answers 200, passes on what the client sent early, and tunnels.
func (p *Proxy) openTunnel(client net.Conn, brw *bufio.ReadWriter, upstream net.Conn) int64 {
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return 0
	}
	var early int64
	if n := brw.Reader.Buffered(); n > 0 {
		buf, _ := brw.Reader.Peek(n)
		if _, err := upstream.Write(buf); err != nil {
			return 0
		}
		early = int64(n)
	}
	return early + tunnel(client, upstream)
}

// bufferPool lends the reverse proxy its copy buffers, rather than a new
// 32 KiB one per request.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
