package reliability

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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
)

// httpServe is one `dsh serve --http` on loopback.
type httpServe struct {
	url, token string
	rtBase     string
	cmd        *exec.Cmd
	stderr     *syncbuf.Buffer
}

func startHTTP(t *testing.T, compYAML string) *httpServe {
	t.Helper()
	return startHTTPEnv(t, nil, compYAML)
}

// startHTTPEnv is startHTTP with extra variables in dsh's environment.
func startHTTPEnv(t *testing.T, env []string, compYAML string) *httpServe {
	t.Helper()
	s := &httpServe{rtBase: t.TempDir(), stderr: &syncbuf.Buffer{}}
	s.cmd = exec.Command(filepath.Join(binDir, "dsh"), "serve", "--http", "127.0.0.1:0", "--release-grace", "300ms", writeComp(t, compYAML))
	s.cmd.Env = append(append(os.Environ(), env...), "XDG_RUNTIME_DIR="+s.rtBase)
	pr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", s.stderr)
		}
	})
	sc := bufio.NewScanner(pr)
	urlRe, tokRe := regexp.MustCompile(`at (http://\S+/)`), regexp.MustCompile(`bearer token: (\S+)`)
	for sc.Scan() {
		line := sc.Text()
		_, _ = s.stderr.Write([]byte(line + "\n"))
		if m := urlRe.FindStringSubmatch(line); m != nil {
			s.url = m[1]
		}
		if m := tokRe.FindStringSubmatch(line); m != nil {
			s.token = m[1]
			break
		}
	}
	go func() { _, _ = io.Copy(s.stderr, pr) }()
	if s.url == "" || s.token == "" {
		t.Fatalf("dsh serve --http printed no URL and token:\n%s", s.stderr)
	}
	return s
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

func (s *httpServe) connect(t *testing.T, ctx context.Context) *mcp.ClientSession {
	t.Helper()
	return s.connectWith(t, ctx, nil)
}

// connectWith connects a client with opts.
func (s *httpServe) connectWith(t *testing.T, ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "reliability", Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   s.url,
		HTTPClient: &http.Client{Transport: bearer{s.token, http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // sessions are what these tests are about
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// post sends one raw JSON-RPC message as a given session (what a command
// could do with the token and a session id it found) and returns the
// HTTP status and body.
func (s *httpServe) post(t *testing.T, token, session, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func callText(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	if _, ok := args["description"]; !ok && tool == "bash" {
		args["description"] = "reliability"
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n"), r
}

// A command sees the runtime directory, the spill folders and its own
// environment. None of them names a session, so a command of session B
// cannot act as session A: not with A's job id, not with A's spill
// resource, not with the token plus any name it can list.
func TestMCPSessionIDsStayHidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	s := startHTTP(t, toolsComp)
	a, b := s.connect(t, ctx), s.connect(t, ctx)
	ids := []string{a.ID(), b.ID()}
	if ids[0] == "" || ids[0] == ids[1] {
		t.Fatalf("session ids %q", ids)
	}

	// Session A: a background job, and a spill file.
	m := marker(600000)
	_, r := callText(t, ctx, a, "bash", map[string]any{"command": "sleep " + m, "run_in_background": true})
	var job struct {
		JobID string `json:"jobId"`
	}
	bs, _ := json.Marshal(r.StructuredContent)
	if json.Unmarshal(bs, &job) != nil || job.JobID == "" {
		t.Fatalf("background start: %s", bs)
	}
	_, r = callText(t, ctx, a, "bash", map[string]any{"command": "seq 1 50000"})
	var aLink string
	for _, c := range r.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			aLink = l.URI
		}
	}
	if aLink == "" || !waitFor(30*time.Second, func() bool { return alive(m) }) {
		t.Fatalf("session A has no spill link (%q) or no running job", aLink)
	}

	f := fault(t, "http: a command looks for session ids")
	// What session B's command can see.
	seen, _ := callText(t, ctx, b, "bash", map[string]any{"command": `rt=$(ls -d "$XDG_RUNTIME_DIR"/dsh/host-*); echo "RT=$rt"; ls -laR "$XDG_RUNTIME_DIR"; env; echo TOKEN=$(cat "$rt/http-token"); echo SPILL $(ls "$rt/spill")`})
	if strings.Contains(seen, "[output truncated") || !strings.Contains(seen, "TOKEN=") {
		t.Fatalf("the command's view: %q", seen)
	}
	// What the files hold, the processes' command lines and environments.
	var leaks []string
	check := func(where, text string) {
		for _, id := range ids {
			if strings.Contains(text, id) {
				leaks = append(leaks, where)
			}
		}
	}
	check("the command's listing and environment", seen)
	_ = filepath.Walk(s.rtBase, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		check(p, p)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			check(p+" (content)", string(b))
		}
		return nil
	})
	pids := testplugins.Running(binDir)
	for _, line := range testplugins.Matching("sleep " + m) {
		pids = append(pids, mustAtoi(line[:strings.Index(line, ":")]))
	}
	for _, pid := range pids {
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + f)
			check("/proc/"+strconv.Itoa(pid)+"/"+f, string(b))
		}
	}
	if len(leaks) > 0 {
		t.Fatalf("a session id shows in: %v", leaks)
	}
	f.Saw("no session id in the runtime directory (names and contents), the command's listing and environment, or any process's command line and environment")

	f = fault(t, "http: session B acts on session A's job with what it can see")
	token := regexp.MustCompile(`TOKEN=(\S+)`).FindStringSubmatch(seen)[1]
	var names []string
	for _, line := range strings.Split(seen, "\n") {
		if rest, ok := strings.CutPrefix(line, "SPILL "); ok {
			names = strings.Fields(rest)
		}
	}
	if len(names) == 0 {
		t.Fatalf("spill folders seen: %v", names)
	}
	// Each name, and each tail of it, as a session id: no session answers.
	kill := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job_kill","arguments":{"job_id":"` + job.JobID + `"}}}`
	tries := 0
	for _, n := range names {
		cands := []string{n}
		for i, c := range n {
			if c == '-' || c == '_' {
				cands = append(cands, n[i+1:])
			}
		}
		for _, c := range cands {
			tries++
			if code, body := s.post(t, token, c, kill); code/100 == 2 {
				t.Fatalf("job_kill as session %q (from spill folder %q) was accepted: %d %s", c, n, code, body)
			}
		}
	}
	// B's own session, with A's job and A's spill resource.
	// Answered word for word as an id nobody has: nothing says A's job
	// exists.
	for _, tool := range []string{"job_kill", "job_output"} {
		out, r := callText(t, ctx, b, tool, map[string]any{"job_id": job.JobID})
		unknown, ru := callText(t, ctx, b, tool, map[string]any{"job_id": "j999"})
		if !r.IsError || !ru.IsError || out != strings.ReplaceAll(unknown, "j999", job.JobID) {
			t.Fatalf("B's %s of A's job: %q; of an unknown id: %q", tool, out, unknown)
		}
	}
	// B's job_list names none of A's jobs; A's names it.
	if out, r := callText(t, ctx, b, "job_list", map[string]any{}); r.IsError || strings.Contains(out, job.JobID) || !strings.HasPrefix(out, "[you have no background jobs") {
		t.Fatalf("B's job_list: %q", out)
	}
	if out, _ := callText(t, ctx, a, "job_list", map[string]any{}); !strings.Contains(out, "[job "+job.JobID+": running") {
		t.Fatalf("A's job_list: %q", out)
	}
	if _, err := b.ReadResource(ctx, &mcp.ReadResourceParams{URI: aLink}); err == nil {
		t.Fatal("B read A's spill resource")
	}
	for _, n := range names {
		uri := "dsh-spill://" + n + "/" + aLink[strings.LastIndex(aLink, "/")+1:]
		if _, err := b.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Fatalf("B read %s", uri)
		}
	}
	if !alive(m) {
		t.Fatal("A's job died")
	}
	if out, _ := callText(t, ctx, a, "job_output", map[string]any{"job_id": job.JobID}); !strings.Contains(out, "still running") {
		t.Fatalf("A's job_output: %q", out)
	}
	f.Saw("%d session ids made of listed names refused; B's job_kill, job_output and resources/read of A's refused, its job_list empty; A's job alive and readable by A", tries)
	callText(t, ctx, b, "bash", map[string]any{"command": "true"})
	f.Saw("B's next command runs")
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// rawSession opens an MCP session over HTTP with raw requests and returns
// its id.
func (s *httpServe) rawSession(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, id)
	}
	if code, body := s.post(t, s.token, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return id
}

// Over HTTP too, a call the client cancels gets no response, even on a
// stream the client keeps open; its tree is killed; the session goes on.
func TestMCPHTTPCancelledCallGetsNoLateResponse(t *testing.T) {
	f := fault(t, "http: notifications/cancelled during a command, its stream kept open")
	s := startHTTP(t, toolsComp)
	sid := s.rawSession(t)
	m := marker(620000)
	body := make(chan string, 1)
	go func() {
		_, b := s.post(t, s.token, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":{"command":"setsid sleep `+m+` & sleep `+m+`","description":"cancelled"}}}`)
		body <- b
	}()
	if !waitFor(30*time.Second, func() bool { return len(testplugins.Matching("sleep "+m)) >= 2 }) {
		t.Fatal("the command never ran")
	}
	if code, b := s.post(t, s.token, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"changed my mind"}}`); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, b)
	}
	waitGone(t, m, 30*time.Second)
	f.Saw("command tree killed")
	// The call's stream ends (dsh ends it, or it carries the response);
	// it must end without a response.
	select {
	case b := <-body:
		if strings.Contains(b, `"id":5`) {
			t.Fatalf("a response after notifications/cancelled: %s", b)
		}
		f.Saw("the call's stream ended with no response")
	case <-time.After(60 * time.Second):
		t.Fatal("the cancelled call's stream never ended")
	}
	code, b := s.post(t, s.token, sid, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo next","description":"next"}}}`)
	if code != 200 || !strings.Contains(b, `"id":6`) || !strings.Contains(b, `next`) {
		t.Fatalf("next call: %d %s", code, b)
	}
	f.Saw("the next call in the session answers")
}

// A cancel that reaches dsh before its call (the two are separate HTTP
// requests, handled in whatever order they get to run on a loaded
// machine) still stops the call: its command never runs, and it gets no
// response; the session goes on.
func TestMCPHTTPCancelBeforeItsCall(t *testing.T) {
	f := fault(t, "http: notifications/cancelled handled before its tools/call")
	s := startHTTP(t, toolsComp)
	sid := s.rawSession(t)
	m := marker(640000)
	started := filepath.Join(t.TempDir(), "started")
	if code, b := s.post(t, s.token, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"changed my mind"}}`); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, b)
	}
	// The call's POST is sent from here so that a failing test does not
	// leave it calling t.
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch `+started+`; sleep `+m+`","description":"cancelled first"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
	body := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			body <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body <- resp.Status + " " + string(b)
	}()
	ran := func() bool {
		_, err := os.Stat(started)
		return err == nil || alive(m)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		select {
		case b := <-body:
			if !strings.HasPrefix(b, "200 ") || strings.Contains(b, `"id":5`) {
				t.Fatalf("the call cancelled before it came: %s", b)
			}
		case <-time.After(20 * time.Millisecond):
			if ran() {
				t.Fatal("the command of a call cancelled before it came ran")
			}
			if time.Now().After(deadline) {
				t.Fatal("the call cancelled before it came is still open")
			}
			continue
		}
		break
	}
	// Nothing is left to start it.
	if ran() {
		t.Fatal("the command of a call cancelled before it came ran")
	}
	f.Saw("the call ended at once, with no response, and its command never ran")
	code, b := s.post(t, s.token, sid, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo next","description":"next"}}}`)
	if code != 200 || !strings.Contains(b, `"id":6`) || !strings.Contains(b, `next`) {
		t.Fatalf("next call: %d %s", code, b)
	}
	f.Saw("the next call in the session answers")
}
