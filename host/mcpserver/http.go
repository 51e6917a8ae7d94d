package mcpserver

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

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
		SessionTimeout: opts.SessionTimeout,
	})
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
		h.ServeHTTP(w, r)
	})
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
