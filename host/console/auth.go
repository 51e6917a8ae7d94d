package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"sync"
	"time"
)

// cookieName is the session cookie's name on the console reached at
// hostport: dsh_console_PORT. A browser sends a host's cookies to all its
// ports, so with one name two hosts on one machine would log each other's
// pages out.
func cookieName(hostport string) string {
	_, port, err := net.SplitHostPort(hostport)
	if err != nil || port == "" {
		port = "80"
	}
	return "dsh_console_" + port
}

// How long a login code lasts, and how many of each the server keeps: a
// flood of `dsh console` or logins evicts the oldest, never grows memory.
const (
	codeTTL     = 10 * time.Minute
	maxCodes    = 32
	maxSessions = 64
	maxAttaches = 64
)

func randomID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// session is one browser logged in: its cookie's id maps to it.
type session struct {
	csrf     string
	lastSeen time.Time
}

// attach is the grant to type into one terminal, given to one session.
type attach struct {
	session, owner, id string
	at                 time.Time
}

// auth holds the login codes, the sessions and the attach grants, all in
// memory: a restart of the host logs every page out.
type auth struct {
	now func() time.Time

	mu       sync.Mutex
	codes    map[string]time.Time // code → expiry
	sessions map[string]*session
	attaches map[string]attach
}

func newAuth(now func() time.Time) *auth {
	return &auth{now: now, codes: map[string]time.Time{}, sessions: map[string]*session{}, attaches: map[string]attach{}}
}

// newCode makes a one-time login code.
func (a *auth) newCode() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for c, exp := range a.codes {
		if !now.Before(exp) {
			delete(a.codes, c)
		}
	}
	for len(a.codes) >= maxCodes {
		var oldest string
		for c, exp := range a.codes {
			if oldest == "" || exp.Before(a.codes[oldest]) {
				oldest = c
			}
		}
		delete(a.codes, oldest)
	}
	c := randomID()
	a.codes[c] = now.Add(codeTTL)
	return c
}

// login consumes code and starts a session; "" when the code is unknown,
// used or expired.
func (a *auth) login(code string) (id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.codes[code]
	if !ok || code == "" {
		return ""
	}
	delete(a.codes, code)
	now := a.now()
	if !now.Before(exp) {
		return ""
	}
	for len(a.sessions) >= maxSessions {
		var oldest string
		for id, s := range a.sessions {
			if oldest == "" || s.lastSeen.Before(a.sessions[oldest].lastSeen) {
				oldest = id
			}
		}
		a.dropLocked(oldest)
	}
	id = randomID()
	a.sessions[id] = &session{csrf: randomID(), lastSeen: now}
	return id
}

func (a *auth) dropLocked(id string) {
	delete(a.sessions, id)
	for t, at := range a.attaches {
		if at.session == id {
			delete(a.attaches, t)
		}
	}
}

// session is the session by cookie id, or nil.
func (a *auth) session(id string) (csrf string, ok bool) {
	if id == "" {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok {
		return "", false
	}
	s.lastSeen = a.now()
	return s.csrf, true
}

// newAttach grants session the right to type into a terminal.
func (a *auth) newAttach(sess, owner, id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.attaches) >= maxAttaches {
		var oldest string
		for t, at := range a.attaches {
			if oldest == "" || at.at.Before(a.attaches[oldest].at) {
				oldest = t
			}
		}
		delete(a.attaches, oldest)
	}
	t := randomID()
	a.attaches[t] = attach{session: sess, owner: owner, id: id, at: a.now()}
	return t
}

// attached reports whether token grants session typing into owner/id.
func (a *auth) attached(token, sess, owner, id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.attaches[token]
	return ok && at.session == sess && at.owner == owner && at.id == id
}

func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
