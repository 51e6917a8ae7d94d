package mcpserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/syncbuf"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// httpPeer posts raw messages to an HTTP front end, as a client would.
type httpPeer struct {
	t   *testing.T
	url string
}

// post sends one message as session and returns the status and the body.
func (p *httpPeer) post(session, body string) (int, string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bounded.Bound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", p.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatalf("POST %s: reading the answer: %v", body, err)
	}
	if session == "" {
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	return resp.StatusCode, string(b)
}

// session opens a session and returns its id.
func (p *httpPeer) session() string {
	p.t.Helper()
	code, id := p.post("", `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if code != http.StatusOK || id == "" {
		p.t.Fatalf("initialize: %d, session %q", code, id)
	}
	if code, b := p.post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		p.t.Fatalf("initialized: %d %s", code, b)
	}
	p.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bounded.Bound)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "DELETE", p.url, nil)
		req.Header.Set("Mcp-Session-Id", id)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return id
}

// cancel sends notifications/cancelled for id and returns the status.
func (p *httpPeer) cancel(session string, id int) int {
	p.t.Helper()
	code, _ := p.post(session, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"changed my mind"}}`, id))
	return code
}

// call calls tool with id, and says whether it was answered.
func (p *httpPeer) call(session string, id int, tool string) (answered bool) {
	p.t.Helper()
	code, b := p.post(session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"n":%d}}}`, id, tool, id))
	if code != http.StatusOK {
		p.t.Fatalf("call %d: %d %s", id, code, b)
	}
	answered = strings.Contains(b, fmt.Sprintf(`"id":%d`, id))
	if answered && !strings.Contains(b, fmt.Sprintf(`{\"n\":%d}`, id)) {
		p.t.Fatalf("call %d: answered with %s", id, b)
	}
	return answered
}

// A cancel that comes before its call (the two are separate requests over
// HTTP, handled in any order) stops that call: it never runs and gets no
// response. The cancel stays with its session and its id, applies once,
// is not kept for a call that has ended, is kept a bounded time and in a
// bounded number, and the session goes on.
func TestHTTPCancelBeforeItsCall(t *testing.T) {
	srv, tt := toolServer()
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	logs := &syncbuf.Buffer{}
	calls := newCallStreams(srv, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}), clock.now)
	hs := httptest.NewServer(httpHandler(srv, HTTPOptions{}, calls))
	t.Cleanup(hs.Close) // after the sessions' own cleanups
	p := &httpPeer{t: t, url: hs.URL}
	a, b := p.session(), p.session()
	t.Cleanup(func() { close(tt.release) }) // first: a session ends once its calls have

	// notRun calls block with id, which its cancel must have stopped.
	notRun := func(session string, id int, what string) {
		t.Helper()
		answered := make(chan bool, 1)
		go func() { answered <- p.call(session, id, "block") }()
		select {
		case <-tt.started:
			t.Fatalf("%s: the call ran", what)
		case got := <-answered:
			if got {
				t.Fatalf("%s: the call was answered", what)
			}
		case <-time.After(bounded.Bound):
			t.Fatalf("%s: the call still waits after %v", what, bounded.Bound)
		}
	}
	run := func(session string, id int, what string) {
		t.Helper()
		if !p.call(session, id, "echo") {
			t.Fatalf("%s: call %d was not answered", what, id)
		}
	}

	if code := p.cancel(a, 7); code != http.StatusAccepted {
		t.Fatalf("a cancel before its call: %d", code)
	}
	notRun(a, 7, "a call whose cancel came first")
	if !strings.Contains(logs.String(), "a call cancelled before it came was not run") {
		t.Errorf("not logged:\n%s", logs)
	}
	run(a, 7, "the id again: a cancel applies once")
	run(a, 8, "the next call")

	p.cancel(a, 9)
	run(b, 9, "another session's call with that id")
	notRun(a, 9, "the cancelling session's own call")

	run(a, 10, "a call")
	p.cancel(a, 10)
	run(a, 10, "the id again after a cancel of the call that had ended")

	p.cancel(a, 11)
	clock.advance(cancelMemory)
	run(a, 11, "a call that comes after its cancel expired")

	for id := 100; id <= 100+maxEarlyCancels; id++ {
		p.cancel(a, id)
		clock.advance(time.Millisecond)
	}
	run(a, 100, "a call whose cancel was the oldest of too many")
	notRun(a, 100+maxEarlyCancels, "the call of the newest cancel")

	if code := p.cancel("no-such-session", 12); code != http.StatusNotFound {
		t.Fatalf("a cancel in no session: %d", code)
	}
	calls.mu.Lock()
	_, kept := calls.books["no-such-session"]
	calls.mu.Unlock()
	if kept {
		t.Error("a cancel in no session was kept")
	}

	// A client that goes away mid-call and then cancels it: the call,
	// which may still run, is cancelled.
	ctx, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", p.url, strings.NewReader(`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"block","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", a)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		left <- err
	}()
	bounded.Receive(t, tt.started, "the start of a call")
	leave()
	bounded.Receive(t, left, "the end of a call its client left")
	for deadline := time.Now().Add(bounded.Bound); ; time.Sleep(5 * time.Millisecond) {
		calls.mu.Lock()
		var e mark
		if book := calls.books[a]; book != nil {
			e = book.ended[mustID(t, float64(20))]
		}
		calls.mu.Unlock()
		if e.left {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call's stream did not end when its client left")
		}
	}
	if code := p.cancel(a, 20); code != http.StatusAccepted {
		t.Fatalf("a cancel of a call its client left: %d", code)
	}
	bounded.Receive(t, tt.ended, "the end of a call cancelled after its client left")
	run(a, 21, "the call after")
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
