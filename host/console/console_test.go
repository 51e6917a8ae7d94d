package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/internal/syncbuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource is a host of one entry whose state a test changes.
type fakeSource struct {
	mu      sync.Mutex
	state   string
	subs    map[chan struct{}]bool
	reloads []string
	written []string
}

func newFake() *fakeSource { return &fakeSource{state: "running", subs: map[chan struct{}]bool{}} }

func (f *fakeSource) setState(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = s
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (f *fakeSource) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func (f *fakeSource) Version() string { return "test" }
func (f *fakeSource) File() string    { return "/etc/dsh/comp.yaml" }
func (f *fakeSource) Graph() []host.EntryView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []host.EntryView{{EntryStatus: host.EntryStatus{ID: "shell", Name: "shell", State: f.state, Provides: []string{"executor"}}}}
}
func (f *fakeSource) Changes() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = true
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}
func (f *fakeSource) Reload(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != "shell" {
		return fmt.Errorf("no entry %q: %w", id, ErrNotFound)
	}
	f.reloads = append(f.reloads, id)
	return nil
}
func (f *fakeSource) CompositionText() (string, []byte, error) {
	return f.File(), []byte("plugins: []\n"), nil
}
func (f *fakeSource) CheckComposition(context.Context, []byte) []Problem { return nil }
func (f *fakeSource) ApplyComposition(context.Context, []byte) ([]Problem, error) {
	return nil, nil
}
func (f *fakeSource) Logs(string, string, int) []hostlog.Line       { return nil }
func (f *fakeSource) SubscribeLogs() (<-chan hostlog.Line, func())  { return nil, func() {} }
func (f *fakeSource) Approvals() []host.Question                    { return nil }
func (f *fakeSource) ApprovalChanges() (<-chan struct{}, func())    { return nil, func() {} }
func (f *fakeSource) AnswerApproval(string, bool) error             { return ErrNotFound }
func (f *fakeSource) Agents() []Owner                               { return nil }
func (f *fakeSource) AgentChanges() (<-chan struct{}, func())       { return nil, func() {} }
func (f *fakeSource) CancelCall(string) bool                        { return false }
func (f *fakeSource) KillJob(context.Context, string, string) error { return ErrNotFound }
func (f *fakeSource) WatchJobOutput(ctx context.Context, owner, id string, out func([]byte)) (JobView, error) {
	// Output split inside a character, then the end.
	out([]byte("h\xc3"))
	out([]byte("\xa9llo\n"))
	return JobView{ID: id, State: "exited", ExitCode: 3}, nil
}
func (f *fakeSource) WatchTerminal(ctx context.Context, owner, id string, out func([]byte)) error {
	<-ctx.Done()
	return ctx.Err()
}
func (f *fakeSource) WriteTerminal(_ context.Context, owner, id string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written = append(f.written, owner+"/"+id+":"+string(data))
	return nil
}

const token = "secret-token"

// serveConsole serves a console with a login over fake at a loopback
// address, with MCP answered by a marker handler.
func serveConsole(t *testing.T, fake *fakeSource, opts Options) (*Console, string) {
	t.Helper()
	opts.Source = fake
	opts.Loopback = true
	c := New(opts)
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test-MCP", "1")
		fmt.Fprint(w, "mcp")
	})
	srv := httptest.NewServer(c.Handler(mcp))
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c, srv.URL
}

func noRedirect() *http.Client {
	return &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func do(t *testing.T, method, u string, hdr map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := noRedirect().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login logs in with a fresh code and returns the cookie header.
func login(t *testing.T, c *Console, base string) string {
	t.Helper()
	resp, _ := do(t, "GET", c.LoginURL(base), nil, "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == cookieName(strings.TrimPrefix(base, "http://")) {
			return ck.Name + "=" + ck.Value
		}
	}
	t.Fatal("login set no cookie")
	return ""
}

func TestLoginCodeOnce(t *testing.T) {
	fake := newFake()
	c, base := serveConsole(t, fake, Options{Token: token})
	u := c.LoginURL(base)
	if !strings.HasPrefix(u, base+"/console/login?code=") {
		t.Fatalf("login URL %s", u)
	}
	resp, _ := do(t, "GET", u, nil, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %s to %q, want 303 to /", resp.Status, resp.Header.Get("Location"))
	}
	sc := resp.Header.Get("Set-Cookie")
	for _, want := range []string{cookieName(strings.TrimPrefix(base, "http://")) + "=", "Path=/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %q", sc, want)
		}
	}
	cookie := strings.SplitN(sc, ";", 2)[0]
	resp, body := do(t, "GET", base+"/", map[string]string{"Accept": "text/html", "Cookie": cookie}, "")
	if resp.StatusCode != 200 || !strings.Contains(body, "/console/app.js") {
		t.Fatalf("page with the cookie: %s %q", resp.Status, body)
	}
	// The code is spent.
	resp, body = do(t, "GET", u, nil, "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `data-testid="login-refused"`) || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("reused code: %s %q", resp.Status, body)
	}
	// A made-up session id is no session.
	resp, _ = do(t, "GET", base+"/console/api/graph", map[string]string{"Cookie": cookieName(strings.TrimPrefix(base, "http://")) + "=" + randomID()}, "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged cookie: %s", resp.Status)
	}
}

func TestLoginCodeExpires(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, base := serveConsole(t, newFake(), Options{Token: token, now: clock})
	u := c.LoginURL(base)
	mu.Lock()
	now = now.Add(codeTTL + time.Second)
	mu.Unlock()
	resp, body := do(t, "GET", u, nil, "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "login-refused") {
		t.Fatalf("expired code: %s %q", resp.Status, body)
	}
}

func TestLoginRequired(t *testing.T) {
	_, base := serveConsole(t, newFake(), Options{Token: token})
	resp, body := do(t, "GET", base+"/", map[string]string{"Accept": "text/html,application/xhtml+xml"}, "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `data-testid="login-required"`) {
		t.Fatalf("page without a cookie: %s %q", resp.Status, body)
	}
	resp, body = do(t, "GET", base+"/console/api/graph", nil, "")
	var e struct{ Error string }
	if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
		t.Fatalf("API without a cookie: %s %q", resp.Status, body)
	}
}

func TestOriginAndHost(t *testing.T) {
	c, base := serveConsole(t, newFake(), Options{Token: token})
	cookie := login(t, c, base)
	u, _ := url.Parse(base)
	resp, body := do(t, "GET", base+"/console/api/graph", map[string]string{"Cookie": cookie, "Origin": "http://evil.example"}, "")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "http://evil.example") {
		t.Fatalf("forged Origin: %s %q", resp.Status, body)
	}
	resp, body = do(t, "GET", base+"/console/api/graph", map[string]string{"Cookie": cookie, "Origin": "http://" + u.Host}, "")
	if resp.StatusCode != 200 {
		t.Fatalf("own Origin: %s %q", resp.Status, body)
	}
	// A DNS name rebound to 127.0.0.1.
	resp, body = do(t, "GET", base+"/console/api/graph", map[string]string{"Cookie": cookie, "Host": "rebound.example:" + u.Port()}, "")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "rebound.example") {
		t.Fatalf("bad Host: %s %q", resp.Status, body)
	}
	resp, _ = do(t, "GET", base+"/console/api/graph", map[string]string{"Cookie": cookie, "Host": "localhost:" + u.Port()}, "")
	if resp.StatusCode != 200 {
		t.Fatalf("Host localhost: %s", resp.Status)
	}
}

func TestCSRFAndBearer(t *testing.T) {
	fake := newFake()
	c, base := serveConsole(t, fake, Options{Token: token})
	cookie := login(t, c, base)
	reload := base + "/console/api/entries/shell/reload"
	resp, body := do(t, "POST", reload, map[string]string{"Cookie": cookie}, "")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "X-Dsh-Csrf") {
		t.Fatalf("POST without CSRF: %s %q", resp.Status, body)
	}
	resp, body = do(t, "POST", reload, map[string]string{"Cookie": cookie, "X-Dsh-Csrf": "wrong"}, "")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST with a wrong CSRF: %s %q", resp.Status, body)
	}
	_, body = do(t, "GET", base+"/console/api/session", map[string]string{"Cookie": cookie}, "")
	var sess struct{ CSRF, Version, File string }
	if err := json.Unmarshal([]byte(body), &sess); err != nil || sess.CSRF == "" || sess.File != fake.File() {
		t.Fatalf("session: %q %v", body, err)
	}
	resp, body = do(t, "POST", reload, map[string]string{"Cookie": cookie, "X-Dsh-Csrf": sess.CSRF}, "")
	if resp.StatusCode != 200 || strings.TrimSpace(body) != `{"ok":true}` {
		t.Fatalf("POST with CSRF: %s %q", resp.Status, body)
	}
	resp, body = do(t, "POST", base+"/console/api/entries/nope/reload", map[string]string{"Cookie": cookie, "X-Dsh-Csrf": sess.CSRF}, "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"error"`) {
		t.Fatalf("reload of no entry: %s %q", resp.Status, body)
	}
	// A bearer token is no ambient credential: no CSRF header needed.
	resp, body = do(t, "POST", reload, map[string]string{"Authorization": "Bearer " + token}, "")
	if resp.StatusCode != 200 {
		t.Fatalf("bearer POST: %s %q", resp.Status, body)
	}
	resp, body = do(t, "GET", base+"/console/api/graph", map[string]string{"Authorization": "Bearer " + token}, "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"id":"shell"`) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("bearer GET: %s %q", resp.Status, body)
	}
	resp, _ = do(t, "GET", base+"/console/api/graph", map[string]string{"Authorization": "Bearer wrong"}, "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong bearer: %s", resp.Status)
	}
	// The page itself takes no bearer token.
	resp, _ = do(t, "GET", base+"/", map[string]string{"Accept": "text/html", "Authorization": "Bearer " + token}, "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("page with a bearer token: %s", resp.Status)
	}
	fake.mu.Lock()
	n := len(fake.reloads)
	fake.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d reloads reached the host, want 2", n)
	}
}

func TestTerminalInputNeedsAttach(t *testing.T) {
	fake := newFake()
	c, base := serveConsole(t, fake, Options{Token: token})
	cookie := login(t, c, base)
	_, body := do(t, "GET", base+"/console/api/session", map[string]string{"Cookie": cookie}, "")
	var sess struct{ CSRF string }
	_ = json.Unmarshal([]byte(body), &sess)
	h := map[string]string{"Cookie": cookie, "X-Dsh-Csrf": sess.CSRF}
	in := base + "/console/api/terminals/o1/t1/input"
	resp, _ := do(t, "POST", in, h, `{"attach":"x","data":"ls\r"}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("input without attach: %s", resp.Status)
	}
	_, body = do(t, "POST", base+"/console/api/terminals/o1/t1/attach", h, "")
	var a struct{ Attach string }
	if json.Unmarshal([]byte(body), &a) != nil || a.Attach == "" {
		t.Fatalf("attach: %q", body)
	}
	// The grant is for that terminal only.
	resp, _ = do(t, "POST", base+"/console/api/terminals/o1/t2/input", h, `{"attach":"`+a.Attach+`","data":"x"}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("input to another terminal: %s", resp.Status)
	}
	resp, body = do(t, "POST", in, h, `{"attach":"`+a.Attach+`","data":"ls\r"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("input: %s %q", resp.Status, body)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.written) != 1 || fake.written[0] != "o1/t1:ls\r" {
		t.Fatalf("written: %q", fake.written)
	}
}

func TestAssetsAndHeaders(t *testing.T) {
	c, base := serveConsole(t, newFake(), Options{Token: token})
	cookie := login(t, c, base)
	for path, ct := range map[string]string{"/console/app.js": "text/javascript", "/console/app.css": "text/css"} {
		resp, body := do(t, "GET", base+path, nil, "")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) || body == "" {
			t.Errorf("%s: %s %q %d bytes", path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
	}
	resp, _ := do(t, "GET", base+"/console/nothing.js", nil, "")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("missing asset: %s", resp.Status)
	}
	resp, _ = do(t, "GET", base+"/", map[string]string{"Accept": "text/html", "Cookie": cookie}, "")
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "script-src") || strings.Contains(csp, "style-src") {
		t.Errorf("CSP %q allows more than the page's own scripts and styles", csp)
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("page headers: %v", resp.Header)
	}
}

func TestRouting(t *testing.T) {
	_, base := serveConsole(t, newFake(), Options{Token: token})
	for _, tc := range []struct {
		method string
		hdr    map[string]string
		mcp    bool
	}{
		{"POST", map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, true},
		{"GET", map[string]string{"Accept": "text/event-stream"}, true},
		{"GET", map[string]string{"Accept": "text/html", "Mcp-Session-Id": "s1"}, true},
		{"DELETE", map[string]string{"Mcp-Session-Id": "s1"}, true},
		{"GET", map[string]string{"Accept": "text/html"}, false},
	} {
		resp, _ := do(t, tc.method, base+"/", tc.hdr, "")
		if got := resp.Header.Get("X-Test-MCP") == "1"; got != tc.mcp {
			t.Errorf("%s / %v: to MCP %v, want %v", tc.method, tc.hdr, got, tc.mcp)
		}
	}
	resp, _ := do(t, "GET", base+"/favicon.ico", nil, "")
	if resp.Header.Get("X-Test-MCP") != "" || resp.StatusCode >= 400 {
		t.Errorf("favicon: %s, to MCP %q", resp.Status, resp.Header.Get("X-Test-MCP"))
	}
	resp, body := do(t, "GET", base+"/console/api/nothing", map[string]string{"Authorization": "Bearer " + token}, "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"error"`) {
		t.Errorf("unknown API: %s %q", resp.Status, body)
	}
}

func TestNoAuth(t *testing.T) {
	c, base := serveConsole(t, newFake(), Options{})
	if u := c.LoginURL(base); u != base+"/" {
		t.Fatalf("login URL without a token: %s", u)
	}
	resp, _ := do(t, "GET", base+"/", map[string]string{"Accept": "text/html"}, "")
	if resp.StatusCode != 200 {
		t.Fatalf("page without a token: %s", resp.Status)
	}
	resp, _ = do(t, "POST", base+"/console/api/entries/shell/reload", nil, "")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST without CSRF, no token: %s", resp.Status)
	}
}

// sseReader reads events off a stream.
type sseReader struct {
	events chan [2]string
	resp   *http.Response
}

func openEvents(t *testing.T, ctx context.Context, u string, hdr map[string]string) *sseReader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("%s: %s %q", u, resp.Status, resp.Header.Get("Content-Type"))
	}
	r := &sseReader{events: make(chan [2]string, 100), resp: resp}
	go func() {
		defer close(r.events)
		sc := bufio.NewScanner(resp.Body)
		var ev string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				r.events <- [2]string{ev, line[len("data: "):]}
			case strings.HasPrefix(line, ": "):
				r.events <- [2]string{"comment", line[2:]}
			}
		}
	}()
	return r
}

// next is the next event named name, skipping others.
func (r *sseReader) next(t *testing.T, name string) (string, bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				return "", false
			}
			if ev[0] == name {
				return ev[1], true
			}
		case <-deadline:
			t.Fatalf("no %s event within 20s", name)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEventsGraph(t *testing.T) {
	fake := newFake()
	c, base := serveConsole(t, fake, Options{Token: token, Heartbeat: 50 * time.Millisecond})
	cookie := login(t, c, base)
	if n := fake.subscribers(); n != 0 {
		t.Fatalf("%d subscriptions with no page open", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := openEvents(t, ctx, base+"/console/api/events", map[string]string{"Cookie": cookie})
	first, ok := r.next(t, "graph")
	if !ok || !strings.Contains(first, `"state":"running"`) {
		t.Fatalf("first graph event %q", first)
	}
	if _, ok := r.next(t, "comment"); !ok {
		t.Fatal("no heartbeat")
	}
	fake.setState("crashed")
	ev, ok := r.next(t, "graph")
	if !ok || !strings.Contains(ev, `"state":"crashed"`) {
		t.Fatalf("graph event after the change: %q", ev)
	}
	var g graphJSON
	if err := json.Unmarshal([]byte(ev), &g); err != nil || g.File != fake.File() || len(g.Entries) != 1 {
		t.Fatalf("graph event %q: %v", ev, err)
	}
	// The page goes: the stream ends and its subscription with it.
	cancel()
	r.resp.Body.Close()
	waitFor(t, "subscription stopped after the page went", func() bool { return fake.subscribers() == 0 })
}

func TestStreamsEndWhenHostStops(t *testing.T) {
	fake := newFake()
	c, base := serveConsole(t, fake, Options{Token: token, MaxStreams: 2})
	cookie := login(t, c, base)
	hdr := map[string]string{"Cookie": cookie}
	a := openEvents(t, context.Background(), base+"/console/api/events", hdr)
	defer a.resp.Body.Close()
	b := openEvents(t, context.Background(), base+"/console/api/terminals/o/t/stream", hdr)
	defer b.resp.Body.Close()
	if _, ok := a.next(t, "graph"); !ok {
		t.Fatal("no graph event")
	}
	// The bound: a third stream is refused while two are open.
	resp, body := do(t, "GET", base+"/console/api/events", hdr, "")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "too many") {
		t.Fatalf("third stream: %s %q", resp.Status, body)
	}
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not end the streams within 20s")
	}
	for _, r := range []*sseReader{a, b} {
		for range r.events {
		}
	}
	if n := fake.subscribers(); n != 0 {
		t.Fatalf("%d subscriptions after the host stopped", n)
	}
}

func TestJobOutput(t *testing.T) {
	c, base := serveConsole(t, newFake(), Options{Token: token})
	cookie := login(t, c, base)
	r := openEvents(t, context.Background(), base+"/console/api/jobs/o1/j1/output", map[string]string{"Cookie": cookie})
	defer r.resp.Body.Close()
	var text string
	for {
		ev, ok := <-r.events
		if !ok {
			t.Fatal("stream ended without an end event")
		}
		if ev[0] == "output" {
			var o struct{ Text string }
			_ = json.Unmarshal([]byte(ev[1]), &o)
			text += o.Text
		}
		if ev[0] == "end" {
			if ev[1] != `{"exitCode":3,"state":"exited"}` {
				t.Fatalf("end %q", ev[1])
			}
			break
		}
	}
	if text != "héllo\n" {
		t.Fatalf("output %q", text)
	}
}

// Two hosts on one machine each get a cookie of their own: a browser
// sends a host's cookies to every port, so one name would let a login to
// one console replace the other's session.
func TestCookiePerPort(t *testing.T) {
	a, b := cookieName("127.0.0.1:8765"), cookieName("localhost:8766")
	if a != "dsh_console_8765" || b != "dsh_console_8766" || cookieName("127.0.0.1") != "dsh_console_80" {
		t.Fatalf("cookie names %q %q %q", a, b, cookieName("127.0.0.1"))
	}
}

// Every action and every login is in the log, with how the caller got in
// and how the action ended; the session's id (the cookie's secret) never
// is.
func TestActionsLogged(t *testing.T) {
	var logged syncbuf.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Info})
	c, base := serveConsole(t, newFake(), Options{Token: token, Logger: log})
	cookie := login(t, c, base)
	_, body := do(t, "GET", base+"/console/api/session", map[string]string{"Cookie": cookie}, "")
	var sess struct{ CSRF string }
	if err := json.Unmarshal([]byte(body), &sess); err != nil {
		t.Fatal(err)
	}
	do(t, "POST", base+"/console/api/entries/shell/reload", map[string]string{"Cookie": cookie, "X-Dsh-Csrf": sess.CSRF}, "")
	do(t, "POST", base+"/console/api/entries/nope/reload", map[string]string{"Authorization": "Bearer " + token}, "")
	do(t, "GET", base+"/console/login?code=spent", nil, "")
	// Attaching is an action; each batch of typing after it is not, but a
	// refused one is.
	h := map[string]string{"Cookie": cookie, "X-Dsh-Csrf": sess.CSRF}
	_, body = do(t, "POST", base+"/console/api/terminals/o1/t1/attach", h, "")
	var a struct{ Attach string }
	if json.Unmarshal([]byte(body), &a) != nil || a.Attach == "" {
		t.Fatalf("attach: %q", body)
	}
	if resp, _ := do(t, "POST", base+"/console/api/terminals/o1/t1/input", h, `{"attach":"`+a.Attach+`","data":"ls\r"}`); resp.StatusCode != 200 {
		t.Fatalf("input: %s", resp.Status)
	}
	do(t, "POST", base+"/console/api/terminals/o1/t2/input", h, `{"attach":"`+a.Attach+`","data":"x"}`)
	got := logged.String()
	if strings.Contains(got, `action="POST /console/api/terminals/o1/t1/input"`) {
		t.Errorf("typing was logged as an action:\n%s", got)
	}
	for _, want := range []string{
		"console login: from=127.0.0.1:",
		`console action: action="POST /console/api/entries/shell/reload" by=page status=200`,
		`console action: action="POST /console/api/entries/nope/reload" by="bearer token" status=404`,
		"console login refused: the code is unknown, used or expired: from=127.0.0.1:",
		`console action: action="POST /console/api/terminals/o1/t1/attach" by=page status=200`,
		`console action: action="POST /console/api/terminals/o1/t2/input" by=page status=403`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q:\n%s", want, got)
		}
	}
	if id := strings.TrimPrefix(cookie, cookieName(strings.TrimPrefix(base, "http://"))+"="); id == cookie || strings.Contains(got, id) {
		t.Errorf("the log holds the session id %q:\n%s", id, got)
	}
}
