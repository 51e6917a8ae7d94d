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
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

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

// HTTPHandler serves MCP over stateful streamable HTTP: the bearer token,
// the Origin check, then the go-sdk handler (which also rejects a
// non-localhost Host header arriving on a localhost address).
func (s *Server) HTTPHandler(opts HTTPOptions) http.Handler {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      opts.SessionTimeout,
		MaxRequestBodyBytes: MaxFrame, // as on stdio; the go-sdk's is 4 MiB
	})
	calls := &callStreams{byCall: map[callKey]*callStream{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkOrigin(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		if opts.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(opts.Token)) != 1 {
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

// callStreams ends the stream of a call the client cancels. The go-sdk
// answers a cancelled call once its handler returns and delivers that
// answer on the call's stream if it is still open; the protocol says a
// cancelled request gets no response. So a POST carrying one call gets a
// context of its own, and a notifications/cancelled for that call ends it
// (the go-sdk then has no stream to answer on) before the go-sdk sees the
// cancellation and aborts the handler.
type callStreams struct {
	mu     sync.Mutex
	byCall map[callKey]*callStream
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
	r.Body = io.NopCloser(bytes.NewReader(body))
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
	if msg.Method == "notifications/cancelled" {
		if id, err := jsonrpc.MakeID(msg.Params.RequestID); err == nil {
			c.end(callKey{session, id})
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
	cs := &callStream{end: end, done: make(chan struct{})}
	c.mu.Lock()
	if _, dup := c.byCall[key]; dup {
		cs = nil // the go-sdk refuses a duplicate id in flight
	} else {
		c.byCall[key] = cs
	}
	c.mu.Unlock()
	if cs == nil {
		end()
		h.ServeHTTP(w, r)
		return
	}
	defer func() {
		c.mu.Lock()
		delete(c.byCall, key)
		c.mu.Unlock()
		end()
		close(cs.done)
	}()
	h.ServeHTTP(w, r.WithContext(ctx))
}

// end ends the stream of a call and waits (briefly) until the go-sdk has
// let go of it.
func (c *callStreams) end(key callKey) {
	c.mu.Lock()
	cs := c.byCall[key]
	c.mu.Unlock()
	if cs == nil {
		return
	}
	cs.end()
	select {
	case <-cs.done:
	case <-time.After(10 * time.Second):
	}
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
