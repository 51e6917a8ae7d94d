package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configures the streamable HTTP transport.
type HTTPOptions struct {
	// Token is the bearer token every request must carry; "" turns
	// authentication off, which Check allows on loopback only.
	Token string
	// SessionTimeout closes sessions idle this long; 0 means 30 minutes.
	SessionTimeout time.Duration
	// Principals are further bearer tokens, each mapped to the principal
	// it names: their clients' stateless owners and resume handles are
	// theirs alone. Token's principal is "serve".
	Principals map[string]string
}

// NewToken makes a random bearer token.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// IsLoopback reports whether addr (host:port) binds only loopback.
func IsLoopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// CheckBind refuses what would expose the tools: no token off loopback.
func CheckBind(addr string, token string) error {
	if token == "" && !IsLoopback(addr) {
		return fmt.Errorf("refusing to serve %s without a bearer token: these tools run commands as %s; bind to loopback (127.0.0.1:PORT) or keep the token", addr, currentUser())
	}
	return nil
}

// HTTPHandler serves MCP over streamable HTTP: the bearer token, the
// Origin check, then the go-sdk handler (which also rejects a
// non-localhost Host header arriving on a localhost address). Requests of
// the stateless protocol (an Mcp-Protocol-Version of 2026-07-28 or later
// and no session) go to a stateless handler, every other one to the
// stateful one, which refuses those versions.
func (s *Server) HTTPHandler(opts HTTPOptions) http.Handler {
	return httpHandler(s.srv, opts, newCallStreams(s.srv, s.log, time.Now))
}

// httpHandler is HTTPHandler for any go-sdk server, with the books of its
// calls.
func httpHandler(srv *mcp.Server, opts HTTPOptions, calls *callStreams) http.Handler {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      opts.SessionTimeout,
		MaxRequestBodyBytes: MaxFrame, // as on stdio; the go-sdk's is 4 MiB
	})
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: MaxFrame,
		// The POST is the whole call: a client gives up a call by giving
		// up its request, and nobody is left to answer.
		PropagateRequestCancellation: true,
	})
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= sessionlessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	principals := map[string]string{}
	if opts.Token != "" {
		principals[opts.Token] = servePrincipal
		for tok, name := range opts.Principals {
			principals[tok] = "token:" + name
		}
		// The go-sdk's own middleware carries the principal to the server
		// (RequestExtra.TokenInfo) and keeps a session to its principal.
		h = auth.RequireBearerToken(func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
			if p := principalFor(principals, tok); p != "" {
				return &auth.TokenInfo{UserID: p}, nil
			}
			return nil, auth.ErrInvalidToken
		}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkOrigin(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		if opts.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || principalFor(principals, got) == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="dsh"`)
				http.Error(w, "dsh: a valid bearer token is required (Authorization: Bearer <token>; dsh serve printed where it is)", http.StatusUnauthorized)
				return
			}
		}
		if r.Method == http.MethodPost {
			calls.serve(h, w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// principalFor is the principal of bearer token tok, "" for none; every
// token is compared in constant time.
func principalFor(principals map[string]string, tok string) string {
	found := ""
	for t, p := range principals {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(t)) == 1 {
			found = p
		}
	}
	return found
}

// callStreams ends the stream of a call the client cancels. The go-sdk
// answers a cancelled call once its handler returns and delivers that
// answer on the call's stream if it is still open; the protocol says a
// cancelled request gets no response. So a POST carrying one call gets a
// context of its own, and a notifications/cancelled for that call ends it
// (the go-sdk then has no stream to answer on) before the go-sdk sees the
// cancellation and aborts the handler.
//
// A cancel and its call are separate POSTs, handled in whatever order they
// get to run, so a cancel can come before the call it names (a client that
// gives up as it sends the call). Neither these books nor the go-sdk would
// find that call, which would then run to its end. So a cancel of a call
// not seen yet is kept a while for its session, and a call of that session
// with that id is then not run at all. The go-sdk sees neither: it acts on
// a cancel asynchronously, and one it found nothing for could still hit the
// next call that reuses the id. For the same reason a cancel of a call
// already answered is dropped, as the protocol allows. A cancel of a call
// whose client went away mid-call goes on to the go-sdk, which may still
// be running it.
type callStreams struct {
	srv *mcp.Server
	log hclog.Logger
	now func() time.Time

	mu     sync.Mutex
	byCall map[callKey]*callStream
	books  map[string]*callBook // by session
	swept  time.Time            // when the books were last cleared of stale entries
}

func newCallStreams(srv *mcp.Server, log hclog.Logger, now func() time.Time) *callStreams {
	return &callStreams{srv: srv, log: log, now: now, byCall: map[callKey]*callStream{}, books: map[string]*callBook{}}
}

// A cancel is kept this long for its call, and an ended call this long
// for a late cancel: two requests of one client sent together meet long
// before, even on a loaded machine.
const cancelMemory = 10 * time.Second

// How many of each a session's book holds; the oldest go first.
const (
	maxEarlyCancels = 16
	maxEndedCalls   = 64
)

// callBook is what one session's cancels and calls left behind.
type callBook struct {
	early map[jsonrpc.ID]mark // cancels that came before their call
	ended map[jsonrpc.ID]mark // calls whose POST ended lately
}

type mark struct {
	at time.Time
	// left: the client went away before the call's end, which may still
	// be running.
	left bool
}

type callKey struct {
	session string
	id      jsonrpc.ID
}

type callStream struct {
	end  context.CancelFunc
	done chan struct{} // closed once the go-sdk is done with the POST
}

func (c *callStreams) serve(h http.Handler, w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get("Mcp-Session-Id")
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxFrame+1))
	if err != nil {
		http.Error(w, "dsh: failed to read the request body", http.StatusBadRequest)
		return
	}
	if len(body) > MaxFrame {
		// The go-sdk would answer in plain text; a client reads JSON-RPC.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "close") // the rest of the body stays unread
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = w.Write(tooLarge(body[:min(len(body), headSize)], MaxFrame))
		return
	}
	body = rewriteTaskBody(body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	var msg struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	if session == "" || json.Unmarshal(body, &msg) != nil || msg.Method == "" {
		h.ServeHTTP(w, r)
		return
	}
	if msg.Method == "notifications/cancelled" && msg.ID == nil {
		id, err := jsonrpc.MakeID(msg.Params.RequestID)
		if err == nil && id.IsValid() && !c.cancel(callKey{session, id}) {
			w.WriteHeader(http.StatusAccepted) // as the go-sdk answers a notification
			return
		}
		h.ServeHTTP(w, r)
		return
	}
	id, err := jsonrpc.MakeID(msg.ID)
	if err != nil || !id.IsValid() {
		h.ServeHTTP(w, r)
		return
	}
	key := callKey{session, id}
	ctx, end := context.WithCancel(r.Context())
	defer end()
	cs := &callStream{end: end, done: make(chan struct{})}
	now := c.now()
	c.mu.Lock()
	c.sweepLocked(now)
	if b := c.books[session]; b != nil && fresh(b.early, id, now) {
		// Its cancel came first: the call is not run, and gets what a call
		// cancelled in flight gets, a stream that ends with no response.
		delete(b.early, id)
		keep(b.ended, id, mark{at: now}, maxEndedCalls)
		c.mu.Unlock()
		c.log.Debug("a call cancelled before it came was not run", "id", id.Raw())
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache, no-transform")
		w.WriteHeader(http.StatusOK)
		return
	}
	if _, dup := c.byCall[key]; dup {
		cs = nil // the go-sdk refuses a duplicate id in flight
	} else {
		c.byCall[key] = cs
	}
	c.mu.Unlock()
	if cs == nil {
		h.ServeHTTP(w, r)
		return
	}
	defer func() {
		c.mu.Lock()
		delete(c.byCall, key)
		keep(c.bookLocked(session).ended, id, mark{at: c.now(), left: r.Context().Err() != nil}, maxEndedCalls)
		c.mu.Unlock()
		close(cs.done)
	}()
	h.ServeHTTP(w, r.WithContext(ctx))
}

// cancel acts on a cancel of the call key names, and says whether the
// go-sdk is to see it too. A call in flight: its stream is ended, and
// cancel waits (briefly) until the go-sdk has let go of it. A call
// answered lately: nothing to do. A call not seen yet, in a live session:
// the cancel is kept for it.
func (c *callStreams) cancel(key callKey) (forward bool) {
	live := false
	for ss := range c.srv.Sessions() {
		if ss.ID() == key.session {
			live = true
			break
		}
	}
	now := c.now()
	c.mu.Lock()
	c.sweepLocked(now)
	cs := c.byCall[key]
	if cs == nil {
		b := c.books[key.session]
		switch {
		case b != nil && fresh(b.ended, key.id, now):
			forward = b.ended[key.id].left
		case live:
			keep(c.bookLocked(key.session).early, key.id, mark{at: now}, maxEarlyCancels)
			c.log.Debug("kept the cancellation of a call not seen yet", "id", key.id.Raw())
		default:
			forward = true // the go-sdk answers for a session it does not know
		}
	}
	c.mu.Unlock()
	if cs == nil {
		return forward
	}
	cs.end()
	select {
	case <-cs.done:
	case <-time.After(10 * time.Second):
	}
	return true
}

func (c *callStreams) bookLocked(session string) *callBook {
	b := c.books[session]
	if b == nil {
		b = &callBook{early: map[jsonrpc.ID]mark{}, ended: map[jsonrpc.ID]mark{}}
		c.books[session] = b
	}
	return b
}

// sweepLocked drops stale entries, and the books left empty (so ended
// sessions leave nothing), at most once per cancelMemory: lookups check
// the age of what they find anyway.
func (c *callStreams) sweepLocked(now time.Time) {
	if now.Sub(c.swept) < cancelMemory {
		return
	}
	c.swept = now
	for session, b := range c.books {
		stale := func(_ jsonrpc.ID, m mark) bool { return now.Sub(m.at) >= cancelMemory }
		maps.DeleteFunc(b.early, stale)
		maps.DeleteFunc(b.ended, stale)
		if len(b.early) == 0 && len(b.ended) == 0 {
			delete(c.books, session)
		}
	}
}

// fresh reports whether m holds id from less than cancelMemory ago.
func fresh(m map[jsonrpc.ID]mark, id jsonrpc.ID, now time.Time) bool {
	e, ok := m[id]
	return ok && now.Sub(e.at) < cancelMemory
}

// keep puts e in m under id, first dropping the oldest entry when m holds
// limit.
func keep(m map[jsonrpc.ID]mark, id jsonrpc.ID, e mark, limit int) {
	if _, ok := m[id]; !ok && len(m) >= limit {
		var oldest jsonrpc.ID
		for k, o := range m {
			if !oldest.IsValid() || o.at.Before(m[oldest].at) {
				oldest = k
			}
		}
		delete(m, oldest)
	}
	m[id] = e
}

// checkOrigin blocks browsers on other sites (DNS rebinding, drive-by
// requests): a request with an Origin must come from a loopback origin.
// Clients that are not browsers send no Origin.
func checkOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil {
		return errors.New("dsh: unreadable Origin")
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("dsh: requests from origin %s are refused", o)
}
