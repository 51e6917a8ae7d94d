package main

import (
	"bufio"
	"context"
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
)

// The console through the real binary: the login line, a login, the page
// and the API, MCP beside it, dsh console, and the streams ending with the
// host.

type consoleServe struct {
	cmd       *exec.Cmd
	rt        string
	loginURL  string
	base      string
	token     string
	stdin     io.WriteCloser
	stderrEnd chan struct{}
}

var consoleLineRe = regexp.MustCompile(`^dsh serve: console at (http://[^/\s]+)(/\S*)`)

// startConsoleServe runs dsh serve with args and reads its lines up to the
// console's.
func startConsoleServe(t *testing.T, args ...string) *consoleServe {
	t.Helper()
	s := &consoleServe{rt: t.TempDir(), stderrEnd: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(binDir, "dsh"), append(append([]string{"serve"}, args...), comp(t, toolsComp))...)
	s.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+s.rt)
	s.stdin, _ = s.cmd.StdinPipe()
	pr, _ := s.cmd.StderrPipe()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.stdin.Close()
		_ = s.cmd.Wait()
	})
	lines := make(chan string, 10000)
	go func() {
		defer close(s.stderrEnd)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	tokRe := regexp.MustCompile(`bearer token: (\S+)`)
	deadline := time.After(30 * time.Second)
	for s.loginURL == "" {
		select {
		case line := <-lines:
			if m := tokRe.FindStringSubmatch(line); m != nil {
				s.token = m[1]
			}
			if m := consoleLineRe.FindStringSubmatch(line); m != nil {
				s.base, s.loginURL = m[1], m[1]+m[2]
			}
		case <-deadline:
			t.Fatal("dsh serve printed no console line within 30s")
		}
	}
	return s
}

var noFollow = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// consoleLogin logs in at url and returns the cookie.
func consoleLogin(t *testing.T, url string) string {
	t.Helper()
	resp, body := get(t, url)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login at %s: %s %q", url, resp.Status, body)
	}
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "dsh_console_") && c.HttpOnly && c.SameSite == http.SameSiteStrictMode {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("login set no HttpOnly SameSite=Strict dsh_console_PORT cookie: %v", resp.Header["Set-Cookie"])
	return ""
}

func TestConsoleBesideMCP(t *testing.T) {
	s := startConsoleServe(t, "--http", "127.0.0.1:0")
	if !strings.HasPrefix(s.loginURL, s.base+"/console/login?code=") || s.token == "" {
		t.Fatalf("login URL %q, token %q", s.loginURL, s.token)
	}
	cookie := consoleLogin(t, s.loginURL)
	resp, body := get(t, s.base+"/", "Accept", "text/html", "Cookie", cookie)
	if resp.StatusCode != 200 || !strings.Contains(body, "/console/app.js") {
		t.Fatalf("page: %s %q", resp.Status, body)
	}
	resp, body = get(t, s.base+"/console/api/graph", "Cookie", cookie)
	if resp.StatusCode != 200 || !strings.Contains(body, `"id":"bash"`) || !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("graph: %s %q", resp.Status, body)
	}
	// MCP at / as before: a client's POSTs and its GET stream.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := connectHTTP(t, ctx, s.base+"/", s.token)
	if r := callBash(t, ctx, cs, map[string]any{"command": "echo hi"}); text(t, r) != "hi" {
		t.Fatalf("bash over MCP beside the console: %q", text(t, r))
	}
	_ = cs.Close()
	resp, _ = get(t, s.base+"/", "Accept", "text/event-stream", "Authorization", "Bearer "+s.token)
	if resp.Header.Get("Content-Security-Policy") != "" {
		t.Fatalf("GET / for an event stream reached the console: %s", resp.Status)
	}
	// dsh console asks the running host for a fresh login.
	out, errOut, code := dsh(t, []string{"XDG_RUNTIME_DIR=" + s.rt}, "console")
	fresh := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(fresh, s.base+"/console/login?code=") || fresh == s.loginURL {
		t.Fatalf("dsh console: exit %d %q %s", code, out, errOut)
	}
	consoleLogin(t, fresh)

	// An event stream open: the host still stops at once, and the stream
	// ends with it.
	req, _ := http.NewRequest("GET", s.base+"/console/api/events", nil)
	req.Header.Set("Cookie", cookie)
	ev, err := http.DefaultClient.Do(req)
	if err != nil || ev.StatusCode != 200 {
		t.Fatalf("events: %v %v", err, ev)
	}
	defer ev.Body.Close()
	sc := bufio.NewScanner(ev.Body)
	for sc.Scan() && sc.Text() != "event: graph" {
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the event stream outlived the host by 30s")
	}
	waited := make(chan error, 1)
	go func() { waited <- s.cmd.Wait() }()
	select {
	case err := <-waited:
		if code := s.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("dsh serve exit %d: %v", code, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dsh serve did not stop within 30s of SIGTERM with a console stream open")
	}
}

func TestConsoleAlone(t *testing.T) {
	s := startConsoleServe(t, "--console", "127.0.0.1:0")
	cookie := consoleLogin(t, s.loginURL)
	// Alone, / is the page whatever the Accept.
	resp, body := get(t, s.base+"/", "Cookie", cookie)
	if resp.StatusCode != 200 || !strings.Contains(body, "/console/app.js") {
		t.Fatalf("page: %s %q", resp.Status, body)
	}
	resp, body = get(t, s.base+"/")
	if resp.StatusCode != 401 || !strings.Contains(body, `data-testid="login-required"`) {
		t.Fatalf("page without login: %s %q", resp.Status, body)
	}
	socks, _ := filepath.Glob(filepath.Join(s.rt, "dsh", "host-*", "console-token"))
	if len(socks) != 1 {
		t.Fatalf("console-token files: %v", socks)
	}
	b, _ := os.ReadFile(socks[0])
	resp, body = get(t, s.base+"/console/api/graph", "Authorization", "Bearer "+strings.TrimSpace(string(b)))
	if resp.StatusCode != 200 || !strings.Contains(body, `"id":"bash"`) {
		t.Fatalf("graph with the bearer token: %s %q", resp.Status, body)
	}
	// End of input ends MCP on stdio, and the console with it.
	_ = s.stdin.Close()
	select {
	case <-s.stderrEnd:
	case <-time.After(30 * time.Second):
		t.Fatal("dsh serve --console went on 30s after end of input")
	}
}

func TestConsoleRefusals(t *testing.T) {
	f := comp(t, toolsComp)
	if _, errOut, code := dsh(t, nil, "serve", "--console", "0.0.0.0:0", "--no-auth", f); code != 2 || !strings.Contains(errOut, "without a bearer token") {
		t.Fatalf("--console off loopback without a token: exit %d %s", code, errOut)
	}
	if _, errOut, code := dsh(t, nil, "serve", "--http", "127.0.0.1:0", "--console", "127.0.0.1:0", f); code != 2 || !strings.Contains(errOut, "--console") {
		t.Fatalf("--http with --console: exit %d %s", code, errOut)
	}
	// No console on a stdio-only host: dsh console says how to get one.
	rt := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", f)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		socks, _ := filepath.Glob(filepath.Join(rt, "dsh", "host-*", "control.sock"))
		if len(socks) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no control socket within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, errOut, code := dsh(t, []string{"XDG_RUNTIME_DIR=" + rt}, "console"); code != 1 || !strings.Contains(errOut, "serves no console") {
		t.Fatalf("dsh console of a host without one: exit %d %s", code, errOut)
	}
}
