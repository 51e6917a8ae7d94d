//go:build linux

// Package console holds the console's browser tests: a real `dsh serve
// --http` with the real plugins, its console page driven in Debian's
// chromium by playwright-core (scenarios.mjs beside this file), and MCP
// driven from Go as an agent would drive it. Each scenario is one subtest
// that prints what it checked and saves a screenshot into
// $DSH_CONSOLE_SHOTS (else a temporary folder).
package console

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
)

var binDir string

func TestMain(m *testing.M) { testplugins.Main(m, "dsh-console-", &binDir) }

// scenarioTimeout bounds one node scenario, browser start included; each
// wait inside it has its own 20-30 s bound.
const scenarioTimeout = 150 * time.Second

// browser is what runs the node scenarios: node, the folder holding
// scenarios.mjs and playwright-core, chromium, and where screenshots go.
type browser struct {
	node, dir, chromium, shots string
}

// needBrowser finds node, playwright-core (npm ci in test/console) and
// chromium, or skips naming what is missing; under DSH_NODE_TESTS=1 (set by
// .ci/run, and by make test once npm ci succeeded) a missing playwright-core
// fails, and under DSH_BROWSER_TESTS=1 (.ci/run) a missing chromium.
func needBrowser(t *testing.T) *browser {
	t.Helper()
	dir := filepath.Join(testplugins.Root(), "test", "console")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		if os.Getenv("DSH_NODE_TESTS") == "1" {
			t.Fatalf("playwright-core is not installed in %s (npm ci there): %v", dir, err)
		}
		t.Skipf("playwright-core is not installed in %s: make test installs it when node and npm are there (%s), or run npm ci there", dir, testneeds.Install("npm"))
	}
	b := &browser{node: testneeds.Command(t, "node"), dir: dir, chromium: testneeds.Chromium(t)}
	b.shots = os.Getenv("DSH_CONSOLE_SHOTS")
	if b.shots == "" {
		b.shots = t.TempDir()
	} else if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return b
}

// spec is what one node scenario is told (scenarios.mjs reads it as JSON
// from $DSH_SCENARIO).
type spec struct {
	Scenario string         `json:"scenario"`
	Name     string         `json:"name"` // the subtest's, naming a failure's screenshot
	Chromium string         `json:"chromium"`
	Shots    string         `json:"shots"`
	Base     string         `json:"base,omitempty"`  // http://127.0.0.1:PORT, no slash
	Login    string         `json:"login,omitempty"` // the printed one-time login URL
	Cookie   string         `json:"cookie,omitempty"`
	Token    string         `json:"token,omitempty"`
	Params   map[string]any `json:"params,omitempty"`
}

// answer is Go's side of one `ask:` line of a scenario: the scenario waits
// for it on its stdin before it goes on.
type answer func(ask map[string]any) (map[string]any, error)

// run runs one scenario and returns its result object. The scenario prints
// `check: ...` lines (logged here as they come), `ask: {...}` lines that
// answers (by the ask's name) reply to, and one `result: {...}` at the end.
// A failed scenario, or one past scenarioTimeout, fails t with what the
// scenario printed.
func (b *browser) run(t *testing.T, sp spec, answers map[string]answer) map[string]any {
	t.Helper()
	sp.Chromium, sp.Shots = b.chromium, b.shots
	sp.Name = strings.ReplaceAll(t.Name(), "/", "-")
	js, _ := json.Marshal(sp)
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.node, "scenarios.mjs")
	cmd.Dir = b.dir
	// No terminal colours in what playwright prints: it goes to the test log.
	cmd.Env = append(os.Environ(), "DSH_SCENARIO="+string(js), "FORCE_COLOR=0", "NO_COLOR=1")
	// Its own process group, so that a timeout ends chromium with node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	var result map[string]any
	var other []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "check: "):
			t.Log("checked: " + strings.TrimPrefix(line, "check: "))
		case strings.HasPrefix(line, "ask: "):
			var ask map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "ask: ")), &ask); err != nil {
				t.Errorf("scenario %s: bad ask line %q: %v", sp.Scenario, line, err)
				continue
			}
			name, _ := ask["name"].(string)
			reply := map[string]any{}
			if a, ok := answers[name]; !ok {
				reply["error"] = "the Go test has no answer named " + name
			} else if r, err := a(ask); err != nil {
				reply["error"] = err.Error()
			} else if r != nil {
				reply = r
			}
			rb, _ := json.Marshal(reply)
			_, _ = stdin.Write(append(rb, '\n'))
		case strings.HasPrefix(line, "result: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "result: ")), &result); err != nil {
				t.Errorf("scenario %s: bad result line %q: %v", sp.Scenario, line, err)
			}
		default:
			other = append(other, line)
			t.Log(line)
		}
	}
	_ = stdin.Close()
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("scenario %s: still running after %v (ended)\nstderr:\n%s", sp.Scenario, scenarioTimeout, stderr)
	}
	if err != nil || result == nil {
		t.Fatalf("scenario %s failed: %v\nstdout:\n%s\nstderr:\n%s", sp.Scenario, err, strings.Join(other, "\n"), stderr)
	}
	return result
}

// consoleHost is one `dsh serve --http 127.0.0.1:0` with its console.
type consoleHost struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	file   string // the composition file
	ws     string // the sandbox's workspace
	base   string // http://127.0.0.1:PORT, no slash
	mcpURL string // http://127.0.0.1:PORT/
	token  string // the bearer token
	login  string // the printed one-time console login URL
	rt     string // its XDG_RUNTIME_DIR, where dsh console finds it

	stopOnce sync.Once
	stopErr  error
}

var (
	mcpURLRE = regexp.MustCompile(`MCP over streamable HTTP at (http://\S+/)`)
	tokenRE  = regexp.MustCompile(`bearer token: (\S+)`)
	loginRE  = regexp.MustCompile(`dsh serve: console at (http://[^/\s]+)(/console/login\?code=\S+)`)
	// Under --no-auth: the page itself, no login.
	noAuthRE = regexp.MustCompile(`dsh serve: console at (http://[^/\s]+)/ \(no token: loopback only\)`)
)

// startHost starts dsh serve --http on loopback with composition yaml (in
// a file named comp.yaml) and reads the MCP URL, the token and the console
// login URL it prints; with --no-auth among args, the MCP URL and the
// console's address (no token, no login).
func startHost(t *testing.T, yaml, ws string, args ...string) *consoleHost {
	t.Helper()
	noAuth := false
	for _, a := range args {
		noAuth = noAuth || a == "--no-auth"
	}
	h := &consoleHost{stderr: &syncbuf.Buffer{}, ws: ws}
	h.file = filepath.Join(t.TempDir(), "comp.yaml")
	if err := os.WriteFile(h.file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"serve", "--http", "127.0.0.1:0", "--release-grace", "300ms"}, args...)
	h.cmd = exec.Command(filepath.Join(binDir, "dsh"), append(argv, h.file)...)
	h.cmd.Dir = ws
	h.rt = t.TempDir()
	h.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+h.rt)
	pr, err := h.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", h.stderr)
		}
	})
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		closed := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = h.stderr.Write([]byte(line + "\n"))
			if closed {
				continue
			}
			if m := mcpURLRE.FindStringSubmatch(line); m != nil {
				h.mcpURL = m[1]
			}
			if m := tokenRE.FindStringSubmatch(line); m != nil {
				h.token = m[1]
			}
			if m := loginRE.FindStringSubmatch(line); m != nil {
				h.base, h.login = m[1], m[1]+m[2]
			}
			if m := noAuthRE.FindStringSubmatch(line); m != nil && noAuth {
				h.base = m[1]
			}
			if h.mcpURL != "" && (h.token != "" && h.login != "" || noAuth && h.base != "") {
				closed = true
				close(found)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		if !closed {
			close(found)
		}
	}()
	select {
	case <-found:
	case <-time.After(60 * time.Second):
		t.Fatalf("dsh serve printed no MCP URL, token and console login URL within 60 s:\n%s", h.stderr)
	}
	if noAuth && (h.mcpURL == "" || h.base == "") {
		t.Fatalf("dsh serve --no-auth ended without printing an MCP URL (%q) and the console's address (%q):\n%s", h.mcpURL, h.base, h.stderr)
	}
	if !noAuth && (h.mcpURL == "" || h.token == "" || h.login == "") {
		t.Fatalf("dsh serve ended without printing an MCP URL (%q), a token (%q) and a console login URL (%q):\n%s", h.mcpURL, h.token, h.login, h.stderr)
	}
	return h
}

// freshSession asks the running host for a new login URL (dsh console,
// over its control socket) and logs in with it from Go, returning the
// session cookie: a scenario can then run when the browser's own login
// failed.
func (h *consoleHost) freshSession(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "dsh"), "console")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+h.rt)
	out, err := cmd.CombinedOutput()
	m := regexp.MustCompile(`http://\S+/console/login\?code=\S+`).FindString(string(out))
	if err != nil || m == "" {
		t.Fatalf("dsh console: %v\n%s", err, out)
	}
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(m)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "dsh_console_") && resp.StatusCode == http.StatusSeeOther {
			return c.Value
		}
	}
	t.Fatalf("GET %s: %s, no session cookie", m, resp.Status)
	return ""
}

// stop ends dsh serve as its user would (SIGTERM), once, and waits for it:
// an error when it took longer than 30 s (it is then killed).
func (h *consoleHost) stop() error {
	h.stopOnce.Do(func() {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = h.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = h.cmd.Process.Kill()
			<-done
			h.stopErr = errors.New("dsh serve did not stop within 30 s of SIGTERM")
		}
	})
	return h.stopErr
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

// connect connects an MCP client (the go-sdk, declaring no elicitation, so
// an approval question goes to the console alone).
func (h *consoleHost) connect(t *testing.T, ctx context.Context) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "console-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   h.mcpURL,
		HTTPClient: &http.Client{Transport: bearer{h.token, http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // a session: the console answers its questions
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, h.stderr)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls tool and returns its text, whether it is an error, and its
// structured content.
func call(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool, map[string]any, error) {
	if _, ok := args["description"]; !ok && tool == "bash" {
		args["description"] = "console test"
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, nil, err
	}
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	var sc map[string]any
	if b, err := json.Marshal(r.StructuredContent); err == nil {
		_ = json.Unmarshal(b, &sc)
	}
	return strings.Join(out, "\n"), r.IsError, sc, nil
}

// marker is a number no other test's process carries in its command line.
func marker(base int) string { return strconv.Itoa(base + os.Getpid()%99999) }

// waitFor polls cond every 100 ms until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fileSHA256 is the hex SHA-256 of a file.
func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// exeOf is the executable of a live process.
func exeOf(pid int) string {
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return strings.TrimSuffix(exe, " (deleted)")
}

// num reads a JSON number (a float64) as an int.
func num(v any) (int, error) {
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", v)
	}
	return int(f), nil
}

// pending is a tool call in flight, its result to come.
type pending struct {
	done chan struct{}
	text string
	err  error
	isEr bool
}

// callAsync starts a tool call whose answer waits on the console.
func callAsync(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) *pending {
	p := &pending{done: make(chan struct{})}
	go func() {
		p.text, p.isEr, _, p.err = call(ctx, cs, tool, args)
		close(p.done)
	}()
	return p
}

// wait returns the call's result, or an error after d.
func (p *pending) wait(d time.Duration) (string, bool, error) {
	select {
	case <-p.done:
		return p.text, p.isEr, p.err
	case <-time.After(d):
		return "", false, errors.New("no result within " + d.String())
	}
}

// The browser runs here: chromium through playwright-core against a page
// of its own, with a screenshot. This needs no console, so it shows that
// a failure of the console scenarios is the console's, not the harness's.
func TestBrowserRuns(t *testing.T) {
	b := needBrowser(t)
	r := b.run(t, spec{Scenario: "selftest"}, nil)
	if r["text"] != "dsh console browser test" {
		t.Fatalf("the page read back %v", r["text"])
	}
	shot, _ := r["shot"].(string)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %q: %v", shot, err)
	}
	t.Logf("chromium %v; screenshot %s", r["version"], shot)
}

// cookieName is the console's session cookie at base: dsh_console_PORT.
func cookieName(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	return "dsh_console_" + u.Port()
}
