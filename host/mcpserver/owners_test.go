//go:build linux

package mcpserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testplugins"
)

// agentsComp has every kind of thing an owner holds: jobs (tool-bash),
// terminals (tool-terminal) and a persistent shell (pbash).
const agentsComp = `
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
  - id: term-bash
    name: terminal-bash
  - id: terminal-tools
    name: tool-terminal
  - id: persistent
    name: tool-bash-persistent
    config:
      toolName: pbash
`

const (
	tokenA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	tokenB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// headers is a RoundTripper that adds its headers to every request.
type headers struct {
	set  map[string]string
	base http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.set {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// httpClient connects the go-sdk's own client at version ("" is its
// latest) with a bearer token and, if given, a resume handle.
func httpClient(t *testing.T, url, token, version, resume string) *mcp.ClientSession {
	t.Helper()
	set := map[string]string{"Authorization": "Bearer " + token}
	if resume != "" {
		set[ResumeHeader] = resume
	}
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: headers{set, http.DefaultTransport}}}
	return clientOn(t, tr, version, nil)
}

// call calls tool and returns its text, failing on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return resultText(r)
}

var (
	jobHandle  = regexp.MustCompile(`\bj-[0-9a-f]{32}\b`)
	termHandle = regexp.MustCompile(`\bt-[0-9a-f]{32}\b`)
	jobNumber  = regexp.MustCompile(`\bj[0-9]+\b`)
)

// A client of the stateless protocol over HTTP: no session, each request
// its own. Every tool works; job and terminal ids are unguessable handles
// that any client of the same bearer token's principal can use on a later
// request, and that another principal is told do not exist, in the same
// words as an id nobody has; the persistent shell is the principal's.
func TestStatelessClientsOverHTTP(t *testing.T) {
	s, _ := serveComp(t, agentsComp)
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{Token: tokenA, Principals: map[string]string{tokenB: "ci"}}))
	t.Cleanup(hs.Close) // after the clients, which are closed first

	a1 := httpClient(t, hs.URL, tokenA, "", "")
	if got := a1.InitializeResult().ProtocolVersion; got < sessionlessVersion || a1.ID() != "" {
		t.Fatalf("protocol %q, session %q: want the stateless protocol with no session", got, a1.ID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	tl, err := a1.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"bash", "job_output", "job_kill", "terminal_open", "terminal_send", "terminal_list", "pbash"} {
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+want+",") {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}
	if got := call(t, a1, "bash", map[string]any{"command": "echo hi-$((6*7))", "description": "t"}); !strings.Contains(got, "hi-42") {
		t.Fatalf("bash: %q", got)
	}

	// A job: its id is a handle, which a second client of the principal
	// reads, and the other principal cannot.
	started := call(t, a1, "bash", map[string]any{"command": "sleep 0.2; echo bg-done", "description": "t", "run_in_background": true})
	job := jobHandle.FindString(started)
	if job == "" || jobNumber.MatchString(started) {
		t.Fatalf("background start %q: want a j-<128 bits> handle", started)
	}
	a2 := httpClient(t, hs.URL, tokenA, "", "")
	b := httpClient(t, hs.URL, tokenB, "", "")
	unknown := "j-" + strings.Repeat("0", 32)
	foreign := call(t, b, "job_output", map[string]any{"job_id": job})
	nobody := call(t, b, "job_output", map[string]any{"job_id": unknown})
	if strings.ReplaceAll(foreign, job, "ID") != strings.ReplaceAll(nobody, unknown, "ID") || strings.Contains(foreign, "bg-done") {
		t.Fatalf("another principal's job: %q; an unknown one: %q", foreign, nobody)
	}
	eventually(t, "the other client of the principal reads the job's output", func() bool {
		return strings.Contains(call(t, a2, "job_output", map[string]any{"job_id": job}), "bg-done")
	})

	// A terminal: the same.
	opened := call(t, a1, "terminal_open", map[string]any{})
	term := termHandle.FindString(opened)
	if term == "" {
		t.Fatalf("terminal_open %q: want a t-<128 bits> handle", opened)
	}
	if got := call(t, a2, "terminal_send", map[string]any{"session_id": term, "text": "echo term-$((6*7))"}); !strings.Contains(got, "term-42") {
		t.Fatalf("terminal_send by the principal's other client: %q", got)
	}
	foreign = call(t, b, "terminal_send", map[string]any{"session_id": term, "text": "echo stolen"})
	nobodyTerm := "t-" + strings.Repeat("0", 32)
	nobody = call(t, b, "terminal_send", map[string]any{"session_id": nobodyTerm, "text": "echo stolen"})
	if strings.ReplaceAll(foreign, term, "ID") != strings.ReplaceAll(nobody, nobodyTerm, "ID") {
		t.Fatalf("another principal's terminal: %q; an unknown one: %q", foreign, nobody)
	}

	// The persistent shell is the principal's.
	call(t, a1, "pbash", map[string]any{"command": "cd /tmp && KEPT=persisted", "description": "t"})
	if got := call(t, a2, "pbash", map[string]any{"command": "echo $KEPT $PWD", "description": "t"}); !strings.Contains(got, "persisted /tmp") {
		t.Fatalf("the principal's shell on its other client: %q", got)
	}
	if got := call(t, b, "pbash", map[string]any{"command": "echo ${KEPT:-none}", "description": "t"}); !strings.Contains(got, "none") {
		t.Fatalf("the other principal's shell: %q", got)
	}

	// job_kill by handle ends the process.
	marker := "sleep 311.5"
	started = call(t, a2, "bash", map[string]any{"command": marker, "description": "t", "run_in_background": true})
	job = jobHandle.FindString(started)
	eventually(t, "the job runs", func() bool { return len(testplugins.Matching(marker)) > 0 })
	if got := call(t, b, "job_kill", map[string]any{"job_id": job}); len(testplugins.Matching(marker)) == 0 {
		t.Fatalf("the other principal killed the job: %q", got)
	}
	call(t, a1, "job_kill", map[string]any{"job_id": job})
	eventually(t, "the killed job's process is gone", func() bool { return len(testplugins.Matching(marker)) == 0 })

	// A call that times out, then the next one: each request stands alone.
	timedOut := "sleep 314.5"
	got := call(t, a1, "bash", map[string]any{"command": timedOut, "description": "t", "timeoutMs": 500})
	if !strings.Contains(got, "timed out") {
		t.Fatalf("a command past its timeout: %q", got)
	}
	eventually(t, "the timed-out command is gone", func() bool { return len(testplugins.Matching(timedOut)) == 0 })
	if got := call(t, a2, "bash", map[string]any{"command": "echo after", "description": "t"}); !strings.Contains(got, "after") {
		t.Fatalf("the call after a timeout: %q", got)
	}
	if got := call(t, a1, "job_list", map[string]any{}); !strings.Contains(got, "killed") || strings.Contains(got, timedOut) {
		t.Fatalf("job_list of the principal: %q", got)
	}
}

// Resumable owners: a client that comes back within ResumeWithin with its
// handle, under the same principal, has its jobs; another principal
// presenting it, or anyone after the window, starts afresh, and the jobs
// are gone by then.
func TestResumableOwners(t *testing.T) {
	// A window no loaded machine outruns, for the part inside it; the
	// test then ends it, and a second server checks the timer's own end.
	hs, s := resumableServer(t, 10*time.Minute)

	a := httpClient(t, hs.URL, tokenA, legacy, "")
	handle, _ := a.InitializeResult().Meta[metaResume].(string)
	if len(handle) != 32 {
		t.Fatalf("initialize _meta %v: want a resume handle", a.InitializeResult().Meta)
	}
	if _, said := a.InitializeResult().Meta[metaResumed]; said {
		t.Fatal("resumed said to a client that presented no handle")
	}
	marker := "sleep 312.5"
	job := jobNumber.FindString(call(t, a, "bash", map[string]any{"command": marker, "description": "t", "run_in_background": true}))
	eventually(t, "the job runs", func() bool { return len(testplugins.Matching(marker)) > 0 })
	a.Close()

	// Another principal with the handle: a new owner, told so.
	b := httpClient(t, hs.URL, tokenB, legacy, handle)
	if r, _ := b.InitializeResult().Meta[metaResumed].(bool); r || b.InitializeResult().Meta[metaResume] == handle {
		t.Fatalf("another principal presenting the handle: %v", b.InitializeResult().Meta)
	}
	if got := call(t, b, "job_output", map[string]any{"job_id": job}); !strings.Contains(got, "no") || strings.Contains(got, "running") {
		t.Fatalf("another principal read the job: %q", got)
	}
	b.Close()

	// Its own principal, past the release grace (1ms here): the same owner.
	time.Sleep(50 * time.Millisecond)
	a2 := httpClient(t, hs.URL, tokenA, legacy, handle)
	if r, _ := a2.InitializeResult().Meta[metaResumed].(bool); !r || a2.InitializeResult().Meta[metaResume] != handle {
		t.Fatalf("coming back: %v", a2.InitializeResult().Meta)
	}
	if got := call(t, a2, "job_output", map[string]any{"job_id": job}); strings.Contains(got, "no such") || len(testplugins.Matching(marker)) == 0 {
		t.Fatalf("the job after coming back: %q", got)
	}
	a2.Close()

	// Nobody comes back: the window ends, the job goes, the handle is
	// worth nothing.
	endWindows(t, s)
	eventually(t, "the owner's job is killed once the window ends", func() bool { return len(testplugins.Matching(marker)) == 0 })
	a3 := httpClient(t, hs.URL, tokenA, legacy, handle)
	if r, said := a3.InitializeResult().Meta[metaResumed].(bool); r || !said {
		t.Fatalf("came back after the window: %v", a3.InitializeResult().Meta)
	}
	a3.Close()
	endWindows(t, s)

	// And the window is the one asked for.
	short, _ := resumableServer(t, 300*time.Millisecond)
	c := httpClient(t, short.URL, tokenA, legacy, "")
	handle, _ = c.InitializeResult().Meta[metaResume].(string)
	const lapsed = "sleep 312.75"
	call(t, c, "bash", map[string]any{"command": lapsed, "description": "t", "run_in_background": true})
	eventually(t, "the job runs", func() bool { return len(testplugins.Matching(lapsed)) > 0 })
	c.Close()
	eventually(t, "the owner's job is killed once the window ends", func() bool { return len(testplugins.Matching(lapsed)) == 0 })
	c2 := httpClient(t, short.URL, tokenA, legacy, handle)
	if r, said := c2.InitializeResult().Meta[metaResumed].(bool); r || !said || len(handle) != 32 {
		t.Fatalf("came back after the window with %q: %v", handle, c2.InitializeResult().Meta)
	}
}

// resumableServer serves resumable owners over HTTP, with the window
// given, to tokenA (principal "serve") and tokenB (principal "ci").
func resumableServer(t *testing.T, window time.Duration) (*httptest.Server, *Server) {
	t.Helper()
	s, _ := serveCompWith(t, bashComp, func(o *Options) { o.Resumable, o.ResumeWithin = true, window })
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{Token: tokenA, Principals: map[string]string{tokenB: "ci"}}))
	t.Cleanup(hs.Close) // after the clients, which are closed first
	return hs, s
}

// By default an owner ends with its connection: no handle is given; a
// client that reconnects within the grace gets a new owner, which does not
// see the old jobs while they still run, and after the grace they are gone.
func TestOwnersEndWithTheirConnection(t *testing.T) {
	const grace = 4 * time.Second
	s, _ := serveCompWith(t, bashComp, func(o *Options) { o.ReleaseGrace = grace })
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{Token: tokenA}))
	t.Cleanup(hs.Close) // after the clients, which are closed first
	a := httpClient(t, hs.URL, tokenA, legacy, "")
	if _, given := a.InitializeResult().Meta[metaResume]; given {
		t.Fatalf("a resume handle without resumable owners: %v", a.InitializeResult().Meta)
	}
	marker := "sleep 313.5"
	job := jobNumber.FindString(call(t, a, "bash", map[string]any{"command": marker, "description": "t", "run_in_background": true}))
	eventually(t, "the job runs", func() bool { return len(testplugins.Matching(marker)) > 0 })
	a.Close()
	closed := time.Now()
	a2 := httpClient(t, hs.URL, tokenA, legacy, "whatever")
	if r, said := a2.InitializeResult().Meta[metaResumed]; r != false || !said {
		t.Fatalf("a handle presented where owners end with their connection: %v", a2.InitializeResult().Meta)
	}
	got := call(t, a2, "job_output", map[string]any{"job_id": job})
	alive := len(testplugins.Matching(marker)) > 0
	if time.Since(closed) < grace && !alive {
		t.Fatal("the job was killed before the grace")
	}
	if !strings.Contains(got, "no such job") {
		t.Fatalf("a new connection read the old job: %q", got)
	}
	eventually(t, "the job is killed after the grace", func() bool { return len(testplugins.Matching(marker)) == 0 })
	t.Logf("killed %v after its connection closed", time.Since(closed).Round(time.Millisecond))
}

// A stateless client that sends a progress token hears how its call goes,
// over stdio and over HTTP alike: it has no initialize to wait for.
func TestStatelessClientsHearProgress(t *testing.T) {
	s, _ := serveCompWith(t, bashComp, func(o *Options) { o.ProgressInterval = 200 * time.Millisecond })
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{}))
	t.Cleanup(hs.Close)
	for _, tc := range []struct {
		name string
		tr   func() mcp.Transport
	}{
		{"http", func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: hs.URL} }},
		{"stdio", func() mcp.Transport {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			go func() { _ = s.RunStdio(context.Background(), inR, outW) }()
			t.Cleanup(func() { inW.Close(); outR.Close() })
			return &mcp.IOTransport{Reader: outR, Writer: inW}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var heard []string
			client := mcp.NewClient(&mcp.Implementation{Name: "progress", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					heard = append(heard, r.Params.Message)
					mu.Unlock()
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			cs, err := client.Connect(ctx, tc.tr(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v < sessionlessVersion {
				t.Fatalf("protocol %q", v)
			}
			p := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo step-one; sleep 1.5; echo done", "description": "t"}}
			p.SetProgressToken("tok-1")
			r, err := cs.CallTool(ctx, p)
			if err != nil || !strings.Contains(resultText(r), "done") {
				t.Fatalf("call: %v %v", r, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(heard) == 0 || !strings.Contains(strings.Join(heard, "|"), "step-one") {
				t.Fatalf("progress heard: %q", heard)
			}
		})
	}
}

// A stateless client over HTTP cancels a call by giving up its request:
// the command is stopped, and the next call runs.
func TestStatelessCancelOverHTTP(t *testing.T) {
	s, _ := serveComp(t, bashComp)
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{Token: tokenA}))
	t.Cleanup(hs.Close)
	cs := httpClient(t, hs.URL, tokenA, "", "")
	marker := "sleep 321.5"
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": marker, "description": "t"}})
		errc <- err
	}()
	eventually(t, "the command runs", func() bool { return len(testplugins.Matching(marker)) > 0 })
	cancel()
	select {
	case <-errc:
	case <-time.After(wait):
		t.Fatal("the cancelled call did not return")
	}
	eventually(t, "the cancelled command is stopped", func() bool { return len(testplugins.Matching(marker)) == 0 })
	if got := call(t, cs, "bash", map[string]any{"command": "echo next", "description": "t"}); !strings.Contains(got, "next") {
		t.Fatalf("the call after: %q", got)
	}
}

// endWindows ends at once the wait of every owner whose sessions ended,
// as its window's end would.
func endWindows(t *testing.T, s *Server) {
	t.Helper()
	eventually(t, "every ended session's owner waits", func() bool {
		s.omu.Lock()
		defer s.omu.Unlock()
		for _, r := range s.all {
			if !r.stateless && (r.live > 0 || r.release == nil) {
				return false
			}
		}
		for _, r := range s.all {
			if !r.stateless {
				r.release.Reset(0)
			}
		}
		return true
	})
}
