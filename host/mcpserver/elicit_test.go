//go:build unix

package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
)

// The user's approval through the real binaries: tool-bash under an
// executor that reports a sandbox mode (dsh-bash-pretend, which needs no
// kernel support; dsh-bash-sandbox in one test) asks ctx.approval before
// an escalated run; the policy says ask; the host asks the MCP client's
// user of the session that made the call.

var (
	buildOnce sync.Once
	buildErr  error
)

// plugins builds the binaries these tests run, once per test binary.
func plugins(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "dsh-mcpserver-test-")
		if buildErr != nil {
			return
		}
		pkgs := map[string]string{"shell-env": "./plugins/shell-env", "bash-local": "./plugins/bash-local", "tool-bash": "./plugins/tool-bash", "bash-sandbox": "./plugins/bash-sandbox", "bash-pretend": "./internal/testplugins/bashpretend", "termdrive": "./internal/testplugins/termdrive", "terminal-bash": "./plugins/terminal-bash", "tool-terminal": "./plugins/tool-terminal", "tool-bash-persistent": "./plugins/tool-bash-persistent"}
		args := []string{"build", "-o", binDir + string(os.PathSeparator)}
		for _, p := range pkgs {
			args = append(args, p)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = testplugins.Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		for name, p := range pkgs {
			if err := os.Rename(filepath.Join(binDir, filepath.Base(p)), filepath.Join(binDir, "dsh-"+name)); err != nil {
				buildErr = err
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

const approvalComp = `
sandbox:
  defaultMode: workspace-write
  workspaceRoot: .
approval:
  askTimeout: %s
  rules:
    - {match: "rm *", decision: deny}
  otherwise: ask
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-pretend
  - id: tools
    name: tool-bash
`

// approvalHost starts a host that asks for every escalation, and a Server
// on it; logs collects both their logs.
func approvalHost(t *testing.T, askTimeout string) (*Server, *syncbuf.Buffer) {
	t.Helper()
	return serveComp(t, fmt.Sprintf(approvalComp, askTimeout))
}

// serveComp starts a host on a composition, and a Server on it.
func serveComp(t *testing.T, yaml string) (*Server, *syncbuf.Buffer) {
	t.Helper()
	return serveCompWith(t, yaml, nil)
}

// serveCompWith is serveComp with the Server's options changed by opt.
func serveCompWith(t *testing.T, yaml string, opt func(*Options)) (*Server, *syncbuf.Buffer) {
	t.Helper()
	dir := plugins(t)
	logs := &syncbuf.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	none := func(string) (string, bool) { return "", false }
	comp, err := composition.Parse(filepath.Join(t.TempDir(), "comp.yaml"), []byte(yaml), none)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	h, err := host.Start(ctx, comp, host.Options{PluginPath: []string{dir}, RuntimeBase: t.TempDir(), LookupEnv: none, Logger: logger.Named("host")})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Host: h, Logger: logger.Named("mcp"), ReleaseGrace: time.Millisecond}
	if opt != nil {
		opt(&o)
	}
	s := New(o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close host: %v", err)
		}
		released(t, s)
	})
	return s, logs
}

// fakeUser is a client's user: what it answers, and what it was asked.
type fakeUser struct {
	answer func(ctx context.Context) (*mcp.ElicitResult, error)
	mu     sync.Mutex
	seen   []*mcp.ElicitParams
}

func (u *fakeUser) handler(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	u.mu.Lock()
	u.seen = append(u.seen, req.Params)
	u.mu.Unlock()
	return u.answer(ctx)
}

func (u *fakeUser) questions() []*mcp.ElicitParams {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*mcp.ElicitParams(nil), u.seen...)
}

func accepts(approve bool) *fakeUser {
	return &fakeUser{answer: func(context.Context) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}, nil
	}}
}

func answers(action string) *fakeUser {
	return &fakeUser{answer: func(context.Context) (*mcp.ElicitResult, error) { return &mcp.ElicitResult{Action: action}, nil }}
}

// connectUser opens an in-memory session whose client asks u (nil: a
// client without elicitation) on protocol version.
func connectUser(t *testing.T, s *Server, version string, u *fakeUser) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.MCP().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	return clientOn(t, ct, version, u)
}

func clientOn(t *testing.T, tr mcp.Transport, version string, u *fakeUser) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if u != nil {
		opts.ElicitationHandler = u.handler
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "approver", Version: "1"}, opts).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// escalate calls bash with danger-full-access for cmd.
func escalate(ctx context.Context, cs *mcp.ClientSession, cmd string) (string, bool, error) {
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": cmd, "description": "test", "sandbox_permissions": "danger-full-access", "justification": "it writes outside the workspace",
	}})
	if err != nil {
		return "", false, err
	}
	return resultText(r), r.IsError, nil
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func plainBash(t *testing.T, cs *mcp.ClientSession, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": cmd, "description": "test"}})
	if err != nil {
		t.Fatalf("bash %q: %v", cmd, err)
	}
	return resultText(r)
}

// versions are the two ways of asking: an elicitation request during the
// call (legacy), and an input request in the result (2026-07-28, the
// go-sdk client's latest).
var versions = []struct{ name, version string }{{"elicit", legacy}, {"rounds", ""}}

// Each answer of the user, on each protocol: accept runs the command once;
// decline, cancel, a form without approve and a client without elicitation
// run nothing, and the result says why.
func TestUserApproval(t *testing.T) {
	s, logs := approvalHost(t, "20s")
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			for _, c := range []struct {
				name string
				u    *fakeUser
				ran  bool
				want string
			}{
				{"accept", accepts(true), true, "ran"},
				{"decline", answers("decline"), false, "[sandbox escalation to danger-full-access was denied by the user (declined); nothing was run]"},
				{"cancel", answers("cancel"), false, "was denied: the user dismissed the question without answering; nothing was run]"},
				{"accept without approve", accepts(false), false, "was denied by the user (the form was sent without approve); nothing was run]"},
				{"no elicitation", nil, false, `), and the user could not be asked: the MCP client "approver" does not support elicitation (it declared no elicitation capability), so it cannot ask its user; nothing was run]`},
			} {
				t.Run(c.name, func(t *testing.T) {
					cs := connectUser(t, s, v.version, c.u)
					marker := filepath.Join(t.TempDir(), "ran")
					ctx, cancel := context.WithTimeout(context.Background(), wait)
					defer cancel()
					text, isErr, err := escalate(ctx, cs, "echo run >> "+marker+"; echo ran")
					if err != nil {
						t.Fatal(err)
					}
					if !strings.Contains(text, c.want) || isErr == c.ran {
						t.Errorf("result %q (isError %v), want %q", text, isErr, c.want)
					}
					b, _ := os.ReadFile(marker)
					if runs := strings.Count(string(b), "run\n"); (c.ran && runs != 1) || (!c.ran && runs != 0) {
						t.Errorf("the command ran %d times, want %v once", runs, c.ran)
					}
					if c.u == nil {
						return
					}
					qs := c.u.questions()
					if len(qs) != 1 {
						t.Fatalf("asked %d times, want once", len(qs))
					}
					q := qs[0]
					for _, want := range []string{"The bash tool asks to run a command with more access than its sandbox gives (danger-full-access)", "echo run >> " + marker + "; echo ran", "Its reason (the model's words): it writes outside the workspace", "Nothing runs unless you approve"} {
						if !strings.Contains(q.Message, want) {
							t.Errorf("the question %q lacks %q", q.Message, want)
						}
					}
					schema, _ := json.Marshal(q.RequestedSchema)
					if !strings.Contains(string(schema), `"approve":{"default":false,"description":"Run it this once","title":"Approve","type":"boolean"}`) {
						t.Errorf("schema %s", schema)
					}
				})
			}
		})
	}
	// Each protocol its way: four questions put during the call, four sent
	// back with the result (a client without elicitation is not asked).
	log := logs.String()
	if during, back := strings.Count(log, "asking the user"), strings.Count(log, "the question goes back with the result"); during != 4 || back != 4 {
		t.Errorf("%d questions put during the call and %d sent back, want 4 and 4", during, back)
	}
	// Every decision is logged: who asked, what, and who answered.
	for _, want := range []string{
		`approved=true decided_by=user reason="approved by the user" asked_because="no approval rule matches (allow rules never match a command with ; & | < > ` + "`" + ` $ ( ) or a newline)" kind=sandbox_escalation owner=mcp-`,
		`decided_by=user reason="denied by the user (declined)"`,
		`plugin=tools tool=bash command="echo run >> `,
		"target_mode=danger-full-access",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s", want)
		}
	}
}

// No answer within askTimeout is a denial; the session goes on.
func TestUserApprovalTimeout(t *testing.T) {
	s, _ := approvalHost(t, "1s")
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			done := make(chan struct{})
			defer close(done)
			// The user answers yes, after askTimeout.
			late := &fakeUser{answer: func(ctx context.Context) (*mcp.ElicitResult, error) {
				select {
				case <-time.After(1500 * time.Millisecond):
				case <-done:
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}}
			cs := connectUser(t, s, v.version, late)
			marker := filepath.Join(t.TempDir(), "ran")
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			start := time.Now()
			text, isErr, err := escalate(ctx, cs, "touch "+marker)
			if err != nil {
				t.Fatal(err)
			}
			if !isErr || !strings.Contains(text, "and the user did not answer within 1s (approval.askTimeout); nothing was run]") {
				t.Errorf("result %q (isError %v), want a denial for no answer in time", text, isErr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran without an answer in time")
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the denial took %v", d)
			}
			if got := plainBash(t, cs, "echo next"); got != "next" {
				t.Errorf("the next call: %q", got)
			}
		})
	}
}

// A client that never answers: on the newer protocol its call never
// comes back, and nothing of it runs; the session's other calls do.
func TestUserNeverAnswers(t *testing.T) {
	s, _ := approvalHost(t, "1s")
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			silent := &fakeUser{answer: func(ctx context.Context) (*mcp.ElicitResult, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}}
			cs := connectUser(t, s, v.version, silent)
			marker := filepath.Join(t.TempDir(), "ran")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			text, _, err := escalate(ctx, cs, "touch "+marker)
			switch {
			case v.version == legacy && (err != nil || !strings.Contains(text, "the user did not answer within 1s")):
				t.Errorf("legacy: %q %v, want a denial after askTimeout", text, err)
			case v.version != legacy && err == nil:
				t.Errorf("rounds: the call came back (%q) without the user's answer", text)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran without an answer")
			}
			if got := plainBash(t, cs, "echo next"); got != "next" {
				t.Errorf("the next call: %q", got)
			}
		})
	}
}

// The question goes to the session that made the call, never another.
func TestUserOfTheCallIsAsked(t *testing.T) {
	s, _ := approvalHost(t, "20s")
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			no, yes := answers("decline"), accepts(true)
			a, b := connectUser(t, s, v.version, no), connectUser(t, s, v.version, yes)
			_ = b
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			text, _, err := escalate(ctx, a, "true")
			if err != nil || !strings.Contains(text, "denied by the user (declined)") {
				t.Fatalf("%q %v", text, err)
			}
			if len(no.questions()) != 1 || len(yes.questions()) != 0 {
				t.Fatalf("asked the caller %d times and the other session %d times", len(no.questions()), len(yes.questions()))
			}
		})
	}
}

// A call that comes from no MCP session (dsh call) has no user to ask.
func TestNoSessionNoUser(t *testing.T) {
	s, _ := approvalHost(t, "20s")
	marker := filepath.Join(t.TempDir(), "ran")
	args, _ := json.Marshal(map[string]any{"command": "touch " + marker, "description": "t", "sandbox_permissions": "danger-full-access", "justification": "j"})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := s.h.CallTool(ctx, host.ToolCall{Owner: "cli", Tool: "bash", Arguments: args})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "and the call comes from no MCP session whose user could be asked (a dsh call") {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}

// On the newer protocol the answer comes with the repeated call: it is
// good for that call's question only (same session, tool and arguments),
// once.
func TestRoundsAnswerBindsTheCall(t *testing.T) {
	s, _ := approvalHost(t, "20s")
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.MCP().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	// A client that answers input requests itself.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "manual", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, fmt.Errorf("not used")
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	here, there := t.TempDir(), t.TempDir()
	args := func(cmd string) map[string]any {
		return map[string]any{"command": cmd, "workdir": here, "description": "t", "sandbox_permissions": "danger-full-access", "justification": "j"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	call := func(p *mcp.CallToolParams) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	yes := mcp.InputResponseMap{inputID: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	ask := func(a map[string]any) *mcp.CallToolResult {
		t.Helper()
		r := call(&mcp.CallToolParams{Name: "bash", Arguments: a})
		if !r.NeedsInput() || r.InputRequests[inputID] == nil || r.RequestState == "" {
			t.Fatalf("first round: %+v, want the question back", r)
		}
		return r
	}
	ran := func(dir string) string {
		b, _ := os.ReadFile(filepath.Join(dir, "ran"))
		return string(b)
	}
	const cmd = "echo run >> ran"
	r := ask(args(cmd))
	if q := r.InputRequests[inputID].(*mcp.ElicitParams); !strings.Contains(q.Message, cmd) {
		t.Fatalf("question %q", q.Message)
	}
	if ran(here) != "" {
		t.Fatal("the first round ran the command")
	}
	// The answer with other arguments approves nothing, even where the
	// question reads the same (the same command in another folder): it is
	// asked anew.
	elsewhere := args(cmd)
	elsewhere["workdir"] = there
	if again := call(&mcp.CallToolParams{Name: "bash", Arguments: elsewhere, InputResponses: yes, RequestState: r.RequestState}); !again.NeedsInput() {
		t.Fatalf("an answer given for other arguments ran: %q", resultText(again))
	}
	// The state was used up by that attempt: the right call with it is
	// asked anew too.
	if again := call(&mcp.CallToolParams{Name: "bash", Arguments: args(cmd), InputResponses: yes, RequestState: r.RequestState}); !again.NeedsInput() {
		t.Fatalf("a state used up ran: %q", resultText(again))
	}
	if ran(here) != "" || ran(there) != "" {
		t.Fatal("ran without an answer to its own question")
	}
	// A question answered by the repeated call runs, once; the same state
	// again does not.
	r = ask(args(cmd))
	if done := call(&mcp.CallToolParams{Name: "bash", Arguments: args(cmd), InputResponses: yes, RequestState: r.RequestState}); done.NeedsInput() || done.IsError {
		t.Fatalf("approved call: %+v %q", done, resultText(done))
	}
	if replay := call(&mcp.CallToolParams{Name: "bash", Arguments: args(cmd), InputResponses: yes, RequestState: r.RequestState}); !replay.NeedsInput() {
		t.Fatalf("a replayed answer ran again: %q", resultText(replay))
	}
	if got := ran(here); got != "run\n" {
		t.Fatalf("ran %q, want once", got)
	}
	other := "touch other"
	// No answer in the repeated call is a denial.
	r = ask(args(other))
	none := call(&mcp.CallToolParams{Name: "bash", Arguments: args(other), RequestState: r.RequestState})
	if !strings.Contains(resultText(none), "the client repeated the call without the user's answer; nothing was run]") {
		t.Fatalf("no answer: %q", resultText(none))
	}
	// Another session's state answers nothing of its own: its user is
	// asked.
	r = ask(args(other))
	u2 := accepts(true)
	cs2 := connectUser(t, s, "", u2)
	if r2, err := cs2.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: args(other), InputResponses: yes, RequestState: r.RequestState}); err != nil || r2.IsError || len(u2.questions()) != 1 {
		t.Fatalf("another session's state: %+v %v, its user asked %d times, want once", r2, err, len(u2.questions()))
	}
}

// Over dsh's stdio transport and over streamable HTTP too.
func TestUserApprovalTransports(t *testing.T) {
	s, logs := approvalHost(t, "20s")
	t.Run("stdio", func(t *testing.T) {
		for _, v := range versions {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- s.RunStdio(context.Background(), inR, outW) }()
			u := accepts(true)
			cs := clientOn(t, &mcp.IOTransport{Reader: outR, Writer: inW}, v.version, u)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			text, isErr, err := escalate(ctx, cs, "echo ran")
			cancel()
			if err != nil || isErr || text != "ran" || len(u.questions()) != 1 {
				t.Errorf("%s: %q %v %v, asked %d", v.name, text, isErr, err, len(u.questions()))
			}
			cs.Close()
			inW.Close()
			bounded.Receive(t, done, "the server's end")
			outR.Close()
		}
	})
	t.Run("http", func(t *testing.T) {
		hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{}))
		defer hs.Close()
		u := answers("decline")
		cs := clientOn(t, &mcp.StreamableClientTransport{Endpoint: hs.URL}, "", u)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		text, _, err := escalate(ctx, cs, "true")
		if err != nil || !strings.Contains(text, "denied by the user (declined)") || len(u.questions()) != 1 {
			t.Errorf("%q %v, asked %d", text, err, len(u.questions()))
		}
		cs.Close()
	})
	// stdio both ways; over HTTP the go-sdk client speaks the stateless
	// protocol, whose questions go back with the result (input requests),
	// each round a session of its own.
	log := logs.String()
	if during, back := strings.Count(log, "asking the user"), strings.Count(log, "the question goes back with the result"); during != 1 || back != 2 {
		t.Errorf("%d questions put during the call and %d sent back, want 1 and 2", during, back)
	}
}

// Under the real confining executor: a declined escalation runs nothing,
// an approved one runs unconfined once, and the next command is confined
// again.
func TestUserApprovalUnderBashSandbox(t *testing.T) {
	ws := t.TempDir()
	s, _ := serveComp(t, `
sandbox:
  defaultMode: workspace-write
  workspaceRoot: `+ws+`
approval:
  otherwise: ask
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-sandbox
  - id: tools
    name: tool-bash
`)
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			outside := outsideTmp(t)
			no, yes := answers("decline"), accepts(true)
			a, b := connectUser(t, s, v.version, no), connectUser(t, s, v.version, yes)
			if got := plainBash(t, a, "true"); strings.Contains(got, "the sandbox cannot confine commands here") {
				t.Skipf("no sandbox runner here: %s", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			declined := filepath.Join(outside, "declined")
			text, isErr, err := escalate(ctx, a, "touch "+declined)
			if err != nil || !isErr || !strings.Contains(text, "denied by the user (declined); nothing was run]") {
				t.Fatalf("declined: %q %v %v", text, isErr, err)
			}
			mustNotExist(t, declined)
			approved := filepath.Join(outside, "approved")
			text, isErr, err = escalate(ctx, b, "touch "+approved)
			if err != nil || isErr {
				t.Fatalf("approved: %q %v %v", text, isErr, err)
			}
			if _, err := os.Stat(approved); err != nil {
				t.Fatalf("the approved run did not write outside the workspace: %v", err)
			}
			again := filepath.Join(outside, "again")
			if got := plainBash(t, b, "touch "+again); !strings.Contains(got, "[sandbox: file access denied") {
				t.Fatalf("the run after the approved one: %q", got)
			}
			mustNotExist(t, again)
			if len(no.questions()) != 1 || len(yes.questions()) != 1 {
				t.Fatalf("asked %d and %d times, want once each", len(no.questions()), len(yes.questions()))
			}
		})
	}
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Fatalf("%s exists: it ran", path)
	}
}
