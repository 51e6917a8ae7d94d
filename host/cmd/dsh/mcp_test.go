package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
)

// MCP through the real binaries: a go-sdk client drives `dsh serve`.

func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) == 0 {
		t.Fatal("no content")
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("first content is %T", r.Content[0])
	}
	return tc.Text
}

func callBash(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	if _, ok := args["description"]; !ok {
		args["description"] = "test"
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func waitGone(t *testing.T, marker string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	// Absent several polls in a row: a process in the middle of exec
	// briefly shows an empty command line.
	for absent := 0; absent < 3; time.Sleep(20 * time.Millisecond) {
		if len(testplugins.Matching(marker)) == 0 {
			absent++
			continue
		}
		absent = 0
		if time.Now().After(deadline) {
			t.Fatalf("processes with %s still alive after %v: %v", marker, d, testplugins.Matching(marker))
		}
	}
}

func TestMCPStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", "--progress-interval", "200ms", comp(t, toolsComp))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	var progress []string
	var mu sync.Mutex
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != mcp.SupportedProtocolVersions()[0] {
		t.Errorf("negotiated %s over stdio, want the newest %s", v, mcp.SupportedProtocolVersions()[0])
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("tool %s lacks description or schema", tl.Name)
		}
	}
	if strings.Join(names, ",") != "bash,job_kill,job_list,job_output" {
		t.Fatalf("tools: %v", names)
	}

	r := callBash(t, ctx, cs, map[string]any{"command": "echo hi; exit 3"})
	if text(t, r) != "hi\n[exit code: 3]" || !r.IsError {
		t.Fatalf("exit 3: %q isError=%v", text(t, r), r.IsError)
	}
	var facts struct {
		ExitCode int `json:"exitCode"`
	}
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &facts); err != nil || facts.ExitCode != 3 {
		t.Fatalf("structured: %s", b)
	}
	if r := callBash(t, ctx, cs, map[string]any{"command": "echo ok"}); text(t, r) != "ok" || r.IsError {
		t.Fatalf("exit 0: %q %v", text(t, r), r.IsError)
	}

	// Truncated output: a resource link the session can read, whole.
	r = callBash(t, ctx, cs, map[string]any{"command": "seq 1 50000"})
	var link *mcp.ResourceLink
	for _, c := range r.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			link = l
		}
	}
	if link == nil {
		t.Fatalf("no resource link in %d contents", len(r.Content))
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
	if err != nil {
		t.Fatal(err)
	}
	if got := rr.Contents[0].Text; !strings.HasPrefix(got, "1\n2\n") || !strings.HasSuffix(got, "49999\n50000\n") {
		t.Fatalf("spill resource: %d bytes", len(got))
	}

	// Progress while a call runs, for a client that asked for it: the
	// latest line the command printed.
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo first-line; sleep 1.2; echo second-line; sleep 1.2", "description": "wait"}}
	params.SetProgressToken("p1")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(progress, " | ")
	mu.Unlock()
	if !strings.Contains(got, "first-line") || !strings.Contains(got, "second-line") {
		t.Errorf("progress during a 2.4s call: %q", got)
	}

	// Cancellation aborts the command and its tree.
	marker := strconv.Itoa(300000 + os.Getpid()%99999)
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "setsid sleep " + marker + " & sleep " + marker, "description": "d"}})
		done <- err
	}()
	for len(testplugins.Matching("sleep "+marker)) < 2 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	ccancel()
	bounded.Receive(t, done, "the call's end")
	waitGone(t, "sleep "+marker, 5*time.Second)

	// A background job left running dies with the host at end of input.
	marker2 := strconv.Itoa(200000 + os.Getpid()%99999)
	r = callBash(t, ctx, cs, map[string]any{"command": "sleep " + marker2, "run_in_background": true})
	if !strings.Contains(text(t, r), "started") {
		t.Fatalf("background: %q", text(t, r))
	}
	// job_list names it, in text and structured content.
	lr, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_list", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Jobs []struct {
			JobID   string `json:"jobId"`
			Status  string `json:"status"`
			Command string `json:"command"`
		} `json:"jobs"`
	}
	b, _ = json.Marshal(lr.StructuredContent)
	if err := json.Unmarshal(b, &listed); err != nil || len(listed.Jobs) != 1 || listed.Jobs[0].Status != "running" || listed.Jobs[0].Command != "sleep "+marker2 ||
		!strings.HasPrefix(text(t, lr), "[job "+listed.Jobs[0].JobID+": running, started ") || !strings.HasSuffix(text(t, lr), "] sleep "+marker2) || lr.IsError {
		t.Fatalf("job_list: %q %s", text(t, lr), b)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	waitGone(t, "sleep "+marker2, 10*time.Second)
	if left := testplugins.Running(binDir); len(left) > 0 {
		time.Sleep(2 * time.Second)
		if left := testplugins.Running(binDir); len(left) > 0 {
			t.Fatalf("left after end of input: %v", left)
		}
	}
}

// serveHTTP starts `dsh serve --http` and returns its URL and token.
func serveHTTPForTest(t *testing.T, extra ...string) (string, string, *exec.Cmd) {
	t.Helper()
	return serveHTTPComp(t, comp(t, toolsComp), nil, append([]string{"--release-grace", "300ms"}, extra...)...)
}

// serveHTTPComp starts `dsh serve --http` on the composition file f, with
// env added to its environment, and returns its URL and token.
func serveHTTPComp(t *testing.T, f string, env []string, extra ...string) (string, string, *exec.Cmd) {
	t.Helper()
	args := append([]string{"serve", "--http", "127.0.0.1:0"}, extra...)
	args = append(args, f)
	cmd := exec.Command(filepath.Join(binDir, "dsh"), args...)
	cmd.Env = append(append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir()), env...)
	pr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(pr)
	urlRe := regexp.MustCompile(`at (http://\S+/)`)
	tokRe := regexp.MustCompile(`bearer token: (\S+)`)
	var url, token string
	for sc.Scan() {
		line := sc.Text()
		if m := urlRe.FindStringSubmatch(line); m != nil {
			url = m[1]
			if strings.Contains(line, "no token") {
				break
			}
		}
		if m := tokRe.FindStringSubmatch(line); m != nil {
			token = m[1]
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if url == "" {
		t.Fatal("no URL printed")
	}
	return url, token, cmd
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connectHTTP connects the go-sdk client with a session (protocol
// 2025-11-25, before the stateless one).
func connectHTTP(t *testing.T, ctx context.Context, url, token string) *mcp.ClientSession {
	t.Helper()
	return connectHTTPAt(t, ctx, url, token, "2025-11-25", "")
}

// connectHTTPAt connects the go-sdk client at version ("" is its latest),
// presenting resume as the Dsh-Resume header if given.
func connectHTTPAt(t *testing.T, ctx context.Context, url, token, version, resume string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	var rt http.RoundTripper = bearer{token, http.DefaultTransport}
	if resume != "" {
		rt = withHeader{"Dsh-Resume", resume, rt}
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: rt},
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// withHeader adds one header to every request.
type withHeader struct {
	name, value string
	base        http.RoundTripper
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.base.RoundTrip(r)
}

func TestMCPHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url, token, _ := serveHTTPForTest(t)
	if len(token) < 32 {
		t.Fatalf("token %q", token)
	}
	// No token, a wrong token, a foreign Origin: refused.
	for _, c := range []struct {
		auth, origin string
		want         int
	}{{"", "", 401}, {"Bearer nope", "", 401}, {"Bearer " + token, "http://evil.example", 403}} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("auth %q origin %q: status %d, want %d", c.auth, c.origin, resp.StatusCode, c.want)
		}
	}

	a := connectHTTP(t, ctx, url, token)
	b := connectHTTP(t, ctx, url, token)
	if a.ID() == "" || a.ID() == b.ID() {
		t.Fatalf("sessions %q and %q", a.ID(), b.ID())
	}
	marker := strconv.Itoa(100000 + os.Getpid()%99999)
	r := callBash(t, ctx, a, map[string]any{"command": "seq 1 40000; sleep " + marker, "run_in_background": true})
	var job struct {
		JobID string `json:"jobId"`
	}
	bs, _ := json.Marshal(r.StructuredContent)
	_ = json.Unmarshal(bs, &job)
	// Session b cannot see a's job.
	rb, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "job_output", Arguments: map[string]any{"job_id": job.JobID}})
	if err != nil || !rb.IsError || !strings.Contains(text(t, rb), "no such job") {
		t.Fatalf("b read a's job: %v %q", err, text(t, rb))
	}
	// a's spill file is a's alone.
	var link string
	for deadline := time.Now().Add(10 * time.Second); link == "" && time.Now().Before(deadline); {
		ra, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "job_output", Arguments: map[string]any{"job_id": job.JobID}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ra.Content {
			if l, ok := c.(*mcp.ResourceLink); ok {
				link = l.URI
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if link == "" {
		t.Fatal("no spill link for a lossy read")
	}
	if _, err := a.ReadResource(ctx, &mcp.ReadResourceParams{URI: link}); err != nil {
		t.Fatalf("owner's read: %v", err)
	}
	if _, err := b.ReadResource(ctx, &mcp.ReadResourceParams{URI: link}); err == nil {
		t.Fatal("another session read the spill file")
	}
	// When a's session ends, its job dies after the grace.
	if len(testplugins.Matching("sleep "+marker)) == 0 {
		t.Fatal("job not running")
	}
	_ = a.Close()
	waitGone(t, "sleep "+marker, 10*time.Second)
	_ = b.Close()
}

func TestMCPHTTPRefusesExposure(t *testing.T) {
	_, errOut, code := dsh(t, nil, "serve", "--http", "0.0.0.0:0", "--no-auth", comp(t, toolsComp))
	if code != 2 || !strings.Contains(errOut, "without a bearer token") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// On loopback, --no-auth is the user's explicit choice.
	url, token, _ := serveHTTPForTest(t, "--no-auth")
	if token != "" {
		t.Fatalf("token %q with --no-auth", token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if r := callBash(t, ctx, cs, map[string]any{"command": "echo open"}); text(t, r) != "open" {
		t.Fatal(fmt.Sprint(r))
	}
}

// kill -9 of the host: two seconds later, nothing of the composition is
// alive: plugins, commands, and their setsid and double-forked children.
func TestKilledHostLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", comp(t, toolsComp))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	marker := strconv.Itoa(250000 + os.Getpid()%99999)
	script := fmt.Sprintf("sleep %s & setsid sleep %s & (setsid bash -c 'sleep %s' &); sleep %s", marker, marker, marker, marker)
	callBash(t, ctx, cs, map[string]any{"command": script, "run_in_background": true})
	go func() {
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "setsid sleep " + marker + " & sleep " + marker, "description": "fg"}})
	}()
	for len(testplugins.Matching("sleep "+marker)) < 6 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	deadline := killed.Add(2 * time.Second)
	for {
		left := append(testplugins.Matching("sleep "+marker), intsToStrings(testplugins.Running(binDir))...)
		if len(left) == 0 {
			t.Logf("everything gone %v after the kill", time.Since(killed).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alive 2s after the host was killed: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func intsToStrings(v []int) []string {
	var out []string
	for _, i := range v {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// serveTools runs `dsh serve --http` of the tools composition in a
// runtime folder of its own until the test ends, and returns that folder
// (where dsh status and dsh reload find its control socket) once it is
// ready.
func serveTools(t *testing.T) string {
	t.Helper()
	rt := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", "--http", "127.0.0.1:0", comp(t, toolsComp))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
	pr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	sc := bufio.NewScanner(pr)
	for sc.Scan() && !strings.Contains(sc.Text(), "bearer token") {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return rt
}

func TestStatusAndReload(t *testing.T) {
	rt := serveTools(t)
	env := []string{"XDG_RUNTIME_DIR=" + rt}
	pidRe := regexp.MustCompile(`(?m)^\s+bash\s+bash-local\s+active\s+(\d+)\s+(\d+)`)
	out, errOut, code := dsh(t, env, "status")
	m := pidRe.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "tool-bash") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	// How commands are limited, or why they are not.
	if !regexp.MustCompile(`(?m)^limits: (per command: \d+ processes by cgroup v[12], [0-9.]+ [GMK]iB of memory by cgroup v[12]|unavailable \(.+\))$`).MatchString(out) {
		t.Fatalf("status has no limits line:\n%s", out)
	}
	out, errOut, code = dsh(t, env, "reload", "bash")
	m2 := pidRe.FindStringSubmatch(out)
	if code != 0 || !strings.HasPrefix(out, "reloaded bash") || m2 == nil || m2[1] == m[1] {
		t.Fatalf("reload: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := dsh(t, env, "reload", "nosuch"); code != 1 || !strings.Contains(errOut, "no such entry") {
		t.Fatalf("reload nosuch: exit %d %s", code, errOut)
	}
	// The socket is the user's alone.
	socks, _ := filepath.Glob(filepath.Join(rt, "dsh", "host-*", "control.sock"))
	if len(socks) != 1 {
		t.Fatalf("sockets: %v", socks)
	}
	if fi, err := os.Stat(socks[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
}

// A session hears tools/list_changed when what it lists changes, and not
// when a reload keeps the same tools.
func TestMCPToolsListChanged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt := t.TempDir()
	f := comp(t, toolsComp)
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", f)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	listed := func() int {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(tools.Tools)
	}
	if n := listed(); n != 4 {
		t.Fatalf("tools at start: %d", n)
	}

	if _, errOut, code := dsh(t, []string{"XDG_RUNTIME_DIR=" + rt}, "reload", "tools"); code != 0 {
		t.Fatalf("reload: exit %d %s", code, errOut)
	}
	select {
	case <-changed:
		t.Error("a reload that keeps the tools sent tools/list_changed")
	case <-time.After(time.Second):
	}

	if err := os.WriteFile(f, []byte(toolsComp+"    disabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the tools were withdrawn without tools/list_changed")
	}
	if n := listed(); n != 0 {
		t.Errorf("tools after the tool plugin was disabled: %d", n)
	}
}
