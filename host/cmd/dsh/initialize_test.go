package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/bounded"
)

// Nothing is written to a stdio client before it initializes: a tool list
// that changes before initialize sends no tools/list_changed; the first
// line is the initialize response. After initialization, changes are told.
func TestNoNotificationBeforeInitialize(t *testing.T) {
	f := comp(t, toolsComp)
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", f)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	logLines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logLines <- sc.Text()
		}
		close(logLines)
	}()
	waitLog := func(what string) {
		t.Helper()
		for deadline := time.After(bounded.Bound); ; {
			select {
			case l, ok := <-logLines:
				if !ok {
					t.Fatalf("dsh serve ended before %q", what)
				}
				if strings.Contains(l, what) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q within %v", what, bounded.Bound)
			}
		}
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitLog("ready in")

	// The tools go before the client has said anything.
	if err := os.WriteFile(f, []byte(toolsComp+"    disabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitLog("hot reload: applied")
	select {
	case l := <-lines:
		t.Fatalf("written before initialize: %s", l)
	case <-time.After(time.Second): // the go-sdk sends a change within 10 ms
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	first := bounded.Receive(t, lines, "the initialize response")
	var resp struct {
		ID     int             `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(first), &resp); err != nil || resp.ID != 1 || resp.Result == nil {
		t.Fatalf("first line is not the initialize response: %s", first)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if l := bounded.Receive(t, lines, "tools/list"); !strings.Contains(l, `"id":2`) || !strings.Contains(l, `"tools":[]`) {
		t.Fatalf("tools/list after initialize: %s", l)
	}

	// Once initialized, a change is told.
	if err := os.WriteFile(f, []byte(toolsComp), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := bounded.Receive(t, lines, "tools/list_changed after initialization"); !strings.Contains(l, `"method":"notifications/tools/list_changed"`) {
		t.Fatalf("after initialization, a change: %s", l)
	}
}

// serveLogged runs dsh serve --http on 127.0.0.1:0 for the composition
// file f; it returns the URL, the token and the log lines that follow.
func serveLogged(t *testing.T, f string) (url, token string, logLines <-chan string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", "--http", "127.0.0.1:0", f)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	pr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	sc := bufio.NewScanner(pr)
	urlRe := regexp.MustCompile(`at (http://\S+/)`)
	tokRe := regexp.MustCompile(`bearer token: (\S+)`)
	for sc.Scan() && token == "" {
		if m := urlRe.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
		if m := tokRe.FindStringSubmatch(sc.Text()); m != nil {
			token = m[1]
		}
	}
	if url == "" || token == "" {
		t.Fatal("dsh serve --http printed no URL and token")
	}
	lines := make(chan string, 1000)
	go func() {
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	return url, token, lines
}

// waitLine waits for a line containing what.
func waitLine(t *testing.T, lines <-chan string, what string) {
	t.Helper()
	for deadline := time.After(bounded.Bound); ; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("dsh serve ended before %q", what)
			}
			if strings.Contains(l, what) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q within %v", what, bounded.Bound)
		}
	}
}

// Over HTTP too, a session hears of no change before it has sent
// notifications/initialized, even with its stream for server messages
// open; after that it does.
func TestNoNotificationBeforeInitializedHTTP(t *testing.T) {
	f := comp(t, toolsComp)
	url, token, logLines := serveLogged(t, f)
	post := func(session, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	// The stream on which the server sends what answers no request.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	defer stream.Body.Close()
	events := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
	}()

	if err := os.WriteFile(f, []byte(toolsComp+"    disabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitLine(t, logLines, "hot reload: applied")
	select {
	case e := <-events:
		t.Fatalf("sent before notifications/initialized: %s", e)
	case <-time.After(time.Second): // the go-sdk sends a change within 10 ms
	}

	if resp := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	if err := os.WriteFile(f, []byte(toolsComp), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := bounded.Receive(t, events, "tools/list_changed after initialization"); !strings.Contains(e, `"method":"notifications/tools/list_changed"`) {
		t.Fatalf("after initialization: %s", e)
	}
}
