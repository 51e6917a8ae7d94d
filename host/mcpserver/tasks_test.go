//go:build linux

package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
)

// rawClient speaks JSON-RPC lines to RunStdio, as a client with no SDK
// would: what goes on the wire is what is tested.
type rawClient struct {
	t     *testing.T
	in    *io.PipeWriter
	out   *io.PipeReader
	lines *bufio.Reader
	done  chan error
	id    int
}

// rpcReply is a JSON-RPC response.
type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// newRawClient starts a stdio session on s and initializes it with
// capabilities caps.
func newRawClient(t *testing.T, s *Server, caps string) (*rawClient, rpcReply) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &rawClient{t: t, in: inW, out: outR, lines: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() { c.done <- s.RunStdio(context.Background(), inR, outW) }()
	init := c.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"raw","version":"1"}}`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c, init
}

// close ends the session and waits for the server's end.
func (c *rawClient) close() {
	c.t.Helper()
	c.in.Close()
	go func() { _, _ = io.Copy(io.Discard, c.out) }() // notifications still coming
	bounded.Receive(c.t, c.done, "the end of the stdio session")
	c.out.Close()
}

func (c *rawClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// call sends a request and returns its response, skipping the
// notifications that come before it.
func (c *rawClient) call(method, params string) rpcReply {
	c.t.Helper()
	return c.callAnswering(method, params, nil)
}

// callAnswering is call, answering the server's requests that come
// before the response with answer (the result for the request's method
// and params).
func (c *rawClient) callAnswering(method, params string, answer func(method string, params json.RawMessage) string) rpcReply {
	c.t.Helper()
	c.id++
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params))
	type line struct {
		b   []byte
		err error
	}
	for {
		got := make(chan line, 1)
		go func() {
			b, err := c.lines.ReadBytes('\n')
			got <- line{b, err}
		}()
		l := bounded.Receive(c.t, got, "a line from the server")
		if l.err != nil {
			c.t.Fatalf("%s: %v", method, l.err)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			rpcReply
		}
		if err := json.Unmarshal(l.b, &m); err != nil {
			c.t.Fatalf("%s: %s: %v", method, l.b, err)
		}
		if m.Method != "" && m.ID != nil {
			if answer == nil {
				c.t.Fatalf("%s: a request from the server: %s", method, l.b)
			}
			c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, answer(m.Method, m.Params)))
			continue
		}
		if m.Method == "" && string(m.ID) == fmt.Sprint(c.id) {
			return m.rpcReply
		}
	}
}

// wireTaskOf reads a task out of a result: under "task" (tools/call) or
// the result itself (tasks/get, tasks/cancel).
func wireTaskOf(t *testing.T, r rpcReply, nested bool) wireTask {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var w struct {
		Task *wireTask `json:"task"`
		wireTask
	}
	if err := json.Unmarshal(r.Result, &w); err != nil {
		t.Fatalf("%s: %v", r.Result, err)
	}
	if nested {
		if w.Task == nil {
			t.Fatalf("no task in %s", r.Result)
		}
		return *w.Task
	}
	return w.wireTask
}

var taskIDForm = regexp.MustCompile(`^[0-9a-f]{32}$`)

const tasksCaps = `{"tasks":{"list":{},"cancel":{}}}`

func bashTask(command, task string) string {
	return fmt.Sprintf(`{"name":"bash","arguments":{"command":%q,"description":"test"},"task":%s}`, command, task)
}

func taskOp(id string) string { return fmt.Sprintf(`{"taskId":%q}`, id) }

func TestTasks(t *testing.T) {
	s, _ := serveComp(t, bashComp)
	a, init := newRawClient(t, s, tasksCaps)
	var caps struct {
		Capabilities struct {
			Tasks struct {
				List, Cancel *struct{}
				Requests     struct {
					Tools struct{ Call *struct{} }
				}
			}
		}
	}
	if err := json.Unmarshal(init.Result, &caps); err != nil || caps.Capabilities.Tasks.Requests.Tools.Call == nil || caps.Capabilities.Tasks.List == nil || caps.Capabilities.Tasks.Cancel == nil {
		t.Fatalf("initialize result lacks the tasks capability: %s (%v)", init.Result, err)
	}
	var tools struct {
		Tools []struct {
			Name      string
			Execution struct{ TaskSupport string }
		}
	}
	if err := json.Unmarshal(a.call("tools/list", `{}`).Result, &tools); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	for _, tool := range tools.Tools {
		if tool.Execution.TaskSupport != "optional" {
			t.Errorf("tool %s: taskSupport %q, want optional", tool.Name, tool.Execution.TaskSupport)
		}
	}

	t.Run("result", func(t *testing.T) {
		// The command waits for a file the test makes only after the task
		// was created and seen working: the call returned before the
		// command ended, however slow the machine.
		gate := filepath.Join(t.TempDir(), "go")
		created := wireTaskOf(t, a.call("tools/call", bashTask(fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; echo done", gate), `{"ttl":60000}`)), true)
		if !taskIDForm.MatchString(created.TaskID) || created.Status != taskWorking || created.TTL != 60000 || created.PollInterval <= 0 || created.CreatedAt == "" || created.LastUpdatedAt == "" {
			t.Fatalf("created %+v", created)
		}
		if got := wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false); got.Status != taskWorking || got.TaskID != created.TaskID {
			t.Fatalf("tasks/get at once: %+v", got)
		}
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the task completes", func() bool {
			return wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false).Status == taskCompleted
		})
		r := a.call("tasks/result", taskOp(created.TaskID))
		var res struct {
			Content []struct{ Text string }
			IsError bool
			Meta    map[string]struct{ TaskID string } `json:"_meta"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Content) == 0 {
			t.Fatalf("tasks/result: %+v %s", r.Error, r.Result)
		}
		if res.Content[0].Text != "done" || res.IsError || res.Meta[relatedTaskKey].TaskID != created.TaskID {
			t.Fatalf("tasks/result: %s", r.Result)
		}
		var list struct{ Tasks []wireTask }
		if err := json.Unmarshal(a.call("tasks/list", `{}`).Result, &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].TaskID != created.TaskID || list.Tasks[0].Status != taskCompleted {
			t.Fatalf("tasks/list: %+v (%v)", list, err)
		}
		// A tool's own failure is a completed task with that result.
		failed := wireTaskOf(t, a.call("tools/call", bashTask("exit 3", `{}`)), true)
		r = a.call("tasks/result", taskOp(failed.TaskID)) // waits for the end
		if r.Error != nil || !strings.Contains(string(r.Result), `"isError":true`) || !strings.Contains(string(r.Result), "exit code: 3") {
			t.Fatalf("tasks/result of a failing command: %+v %s", r.Error, r.Result)
		}
		if got := wireTaskOf(t, a.call("tasks/get", taskOp(failed.TaskID)), false); got.Status != taskCompleted || got.TTL != defaultTaskTTL.Milliseconds() {
			t.Fatalf("a failing command's task: %+v", got)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		const marker = "sleep 120.25"
		created := wireTaskOf(t, a.call("tools/call", bashTask(marker, `{}`)), true)
		eventually(t, "the command runs", func() bool { return len(testplugins.Matching(marker)) > 0 })
		began := time.Now()
		got := wireTaskOf(t, a.call("tasks/cancel", taskOp(created.TaskID)), false)
		if got.Status != taskCancelled {
			t.Fatalf("tasks/cancel: %+v", got)
		}
		if took := time.Since(began); took > 8*time.Second {
			t.Errorf("tasks/cancel took %v: the call did not end when cancelled", took)
		}
		eventually(t, "the command's process is gone", func() bool { return len(testplugins.Matching(marker)) == 0 })
		if got := wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false); got.Status != taskCancelled {
			t.Fatalf("tasks/get after cancel: %+v", got)
		}
		if r := a.call("tasks/result", taskOp(created.TaskID)); r.Error == nil || !strings.Contains(r.Error.Message, "cancelled") {
			t.Fatalf("tasks/result of a cancelled task: %+v %s", r.Error, r.Result)
		}
		if r := a.call("tasks/cancel", taskOp(created.TaskID)); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("a second tasks/cancel: %+v %s", r.Error, r.Result)
		}
	})

	t.Run("other owner", func(t *testing.T) {
		created := wireTaskOf(t, a.call("tools/call", bashTask("echo mine", `{}`)), true)
		b, _ := newRawClient(t, s, tasksCaps)
		defer b.close()
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			theirs := b.call(method, taskOp(created.TaskID))
			unknown := b.call(method, taskOp(strings.Repeat("0", 32)))
			if theirs.Error == nil || unknown.Error == nil || theirs.Error.Code != unknown.Error.Code ||
				strings.ReplaceAll(theirs.Error.Message, created.TaskID, "ID") != strings.ReplaceAll(unknown.Error.Message, strings.Repeat("0", 32), "ID") {
				t.Errorf("%s of another session's task: %+v, of an unknown one: %+v", method, theirs.Error, unknown.Error)
			}
		}
		var list struct{ Tasks []wireTask }
		if err := json.Unmarshal(b.call("tasks/list", `{}`).Result, &list); err != nil || len(list.Tasks) != 0 {
			t.Errorf("another session lists %+v (%v)", list, err)
		}
		// The task is still its owner's.
		if r := a.call("tasks/result", taskOp(created.TaskID)); r.Error != nil || !strings.Contains(string(r.Result), "mine") {
			t.Errorf("the owner's result after the other session's tries: %+v %s", r.Error, r.Result)
		}
	})

	t.Run("ttl", func(t *testing.T) {
		// A ttl counts from the task's end: the command waits for a file
		// the test makes, so the task is surely alive until then, however
		// slow the machine.
		gate := filepath.Join(t.TempDir(), "go")
		created := wireTaskOf(t, a.call("tools/call", bashTask(fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; echo brief", gate), `{"ttl":1}`)), true)
		if created.TTL != 1 {
			t.Fatalf("ttl %d, want 1", created.TTL)
		}
		time.Sleep(20 * time.Millisecond)
		if got := wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false); got.Status != taskWorking {
			t.Fatalf("a working task older than its ttl: %+v, want working", got)
		}
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the finished task is forgotten after its ttl", func() bool {
			r := a.call("tasks/get", taskOp(created.TaskID))
			return r.Error != nil && r.Error.Code == -32602
		})
		long := wireTaskOf(t, a.call("tools/call", bashTask("true", `{"ttl":86400000}`)), true)
		if long.TTL != maxTaskTTL.Milliseconds() {
			t.Fatalf("ttl %d, want the cap %d", long.TTL, maxTaskTTL.Milliseconds())
		}
		a.call("tasks/result", taskOp(long.TaskID))
	})

	t.Run("cap", func(t *testing.T) {
		s.tasks.mu.Lock()
		s.tasks.maxLive = 1
		s.tasks.mu.Unlock()
		defer func() {
			s.tasks.mu.Lock()
			s.tasks.maxLive = 0
			s.tasks.mu.Unlock()
		}()
		const marker = "sleep 120.5"
		first := wireTaskOf(t, a.call("tools/call", bashTask(marker, `{}`)), true)
		r := a.call("tools/call", bashTask("echo second", `{}`))
		if r.Error == nil || !strings.Contains(r.Error.Message, "already runs 1 tasks") {
			t.Fatalf("a task over the cap: %+v %s", r.Error, r.Result)
		}
		wireTaskOf(t, a.call("tasks/cancel", taskOp(first.TaskID)), false)
		eventually(t, "the command's process is gone", func() bool { return len(testplugins.Matching(marker)) == 0 })
	})

	t.Run("no tasks declared", func(t *testing.T) {
		c, init := newRawClient(t, s, `{}`)
		defer c.close()
		if strings.Contains(string(init.Result), `"tasks"`) {
			t.Errorf("initialize offers tasks to a client that did not declare them: %s", init.Result)
		}
		if r := c.call("tools/list", `{}`); strings.Contains(string(r.Result), "taskSupport") {
			t.Errorf("tools/list offers tasks to a client that did not declare them: %s", r.Result)
		}
		r := c.call("tools/call", bashTask("echo plain", `{}`))
		if r.Error != nil || !strings.Contains(string(r.Result), `"text":"plain"`) || strings.Contains(string(r.Result), "taskId") {
			t.Errorf("a call asking for a task from a client without tasks: %+v %s, want the plain result", r.Error, r.Result)
		}
	})

	t.Run("release", func(t *testing.T) {
		const marker = "sleep 120.75"
		owners := func() int {
			s.tasks.mu.Lock()
			defer s.tasks.mu.Unlock()
			return len(s.tasks.byOwner)
		}
		before := owners()
		d, _ := newRawClient(t, s, tasksCaps)
		wireTaskOf(t, d.call("tools/call", bashTask(marker, `{}`)), true)
		eventually(t, "the command runs", func() bool { return len(testplugins.Matching(marker)) > 0 })
		d.close()
		eventually(t, "the ended session's task's command is gone", func() bool { return len(testplugins.Matching(marker)) == 0 })
		eventually(t, "the ended session's tasks are forgotten and their calls ended", func() bool {
			return owners() == before && len(s.CallsInFlight()) == 0
		})
	})

	a.close()
}

// What the transports move into _meta, and what they leave as it came.
func TestRewriteTaskMessage(t *testing.T) {
	cases := []struct{ method, in, want string }{
		{"tools/call", `{"name":"bash","task":{"ttl":5},"_meta":{"progressToken":1}}`, `{"_meta":{"dev.dsh/task":{"ttl":5},"progressToken":1},"name":"bash"}`},
		{"tools/call", `{"name":"bash","task":{}}`, `{"_meta":{"dev.dsh/task":{}},"name":"bash"}`},
		{"initialize", `{"capabilities":{"tasks":{"list":{}}},"protocolVersion":"2025-11-25"}`, `{"_meta":{"dev.dsh/tasks":{"list":{}}},"capabilities":{"tasks":{"list":{}}},"protocolVersion":"2025-11-25"}`},
		{"tools/call", `{"name":"bash","task":7}`, `{"name":"bash","task":7}`},                       // not a task object: the go-sdk judges it
		{"tools/call", `{"name":"bash","task":{},"_meta":3}`, `{"name":"bash","task":{},"_meta":3}`}, // a _meta it cannot add to
		{"tools/list", `{"task":{}}`, `{"task":{}}`},
		{"initialize", `{"capabilities":{}}`, `{"capabilities":{}}`},
		{"tools/call", `{"name":"ta`, `{"name":"ta`},
	}
	for _, c := range cases {
		if got := string(rewriteTaskMessage(c.method, json.RawMessage(c.in))); got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.method, c.in, got, c.want)
		}
	}
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","task":{}}}`
	if got, want := string(rewriteTaskBody([]byte(body))), `{"id":3,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"dev.dsh/task":{}},"name":"bash"}}`; got != want {
		t.Errorf("body: got %s, want %s", got, want)
	}
	for _, b := range []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `[{"method":"tools/call","params":{"task":{}}}]`} {
		if got := string(rewriteTaskBody([]byte(b))); got != b {
			t.Errorf("body %s rewritten to %s", b, got)
		}
	}
}

// A task's call asks the user as a plain call does: by elicitation, on
// the session, while the client waits for the task's result.
func TestTaskAsksTheUser(t *testing.T) {
	s, _ := approvalHost(t, "20s")
	c, _ := newRawClient(t, s, `{"tasks":{},"elicitation":{"form":{}}}`)
	defer c.close()
	marker := filepath.Join(t.TempDir(), "ran")
	created := wireTaskOf(t, c.call("tools/call", fmt.Sprintf(`{"name":"bash","arguments":{"command":"touch %s; echo ran","description":"test","sandbox_permissions":"danger-full-access","justification":"it writes outside the workspace"},"task":{}}`, marker)), true)
	// The task waits for its user, and holds the question until the
	// client names the task: nothing comes ahead of a ping's answer. (Seen
	// from inside: a tasks/get would name it.)
	eventually(t, "the task is input_required", func() bool {
		s.tasks.mu.Lock()
		defer s.tasks.mu.Unlock()
		for _, mine := range s.tasks.byOwner {
			if tk := mine[created.TaskID]; tk != nil {
				return tk.status == taskInputRequired
			}
		}
		return false
	})
	time.Sleep(200 * time.Millisecond)
	if r := c.call("ping", `{}`); r.Error != nil {
		t.Fatalf("ping: %+v", r.Error)
	}
	var asked []string
	r := c.callAnswering("tasks/result", taskOp(created.TaskID), func(method string, params json.RawMessage) string {
		asked = append(asked, method+" "+string(params))
		return `{"action":"accept","content":{"approve":true}}`
	})
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "elicitation/create ") || !strings.Contains(asked[0], "danger-full-access") {
		t.Fatalf("the user was asked %q, want one elicitation about the escalation", asked)
	}
	if r.Error != nil || !strings.Contains(string(r.Result), `"text":"ran"`) {
		t.Fatalf("tasks/result: %+v %s", r.Error, r.Result)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	if got := wireTaskOf(t, c.call("tasks/get", taskOp(created.TaskID)), false); got.Status != taskCompleted {
		t.Fatalf("after the answer: %+v", got)
	}
}

// A background command asked for as a task: the task works while the
// job runs (job_output reads it meanwhile, consuming, as always), its
// result is the job's last read, and cancelling it kills the job's tree.
func TestBackgroundTasks(t *testing.T) {
	s, _ := serveComp(t, bashComp)
	a, _ := newRawClient(t, s, tasksCaps)
	defer a.close()
	bg := func(command string) string {
		return fmt.Sprintf(`{"name":"bash","arguments":{"command":%q,"description":"test","run_in_background":true},"task":{}}`, command)
	}
	t.Run("result", func(t *testing.T) {
		created := wireTaskOf(t, a.call("tools/call", bg("echo first; sleep 1.5; echo second")), true)
		got := wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false)
		if got.Status != taskWorking {
			t.Fatalf("at once: %+v", got)
		}
		eventually(t, "the task names its job", func() bool {
			return strings.Contains(wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false).StatusMessage, "background job j")
		})
		job := regexp.MustCompile(`j[0-9]+`).FindString(wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false).StatusMessage)
		// The agent's own read meanwhile consumes "first".
		eventually(t, "job_output reads the first line", func() bool {
			return strings.Contains(string(a.call("tools/call", fmt.Sprintf(`{"name":"job_output","arguments":{"job_id":%q}}`, job)).Result), "first")
		})
		if st := wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false).Status; st != taskWorking {
			t.Fatalf("the task ended while its job ran: %s", st)
		}
		r := a.call("tasks/result", taskOp(created.TaskID)) // waits for the job's end
		if r.Error != nil || !strings.Contains(string(r.Result), "second") || strings.Contains(string(r.Result), "first") || !strings.Contains(string(r.Result), `"status":"completed","exitCode":0`) {
			t.Fatalf("tasks/result: %+v %s", r.Error, r.Result)
		}
		if got := wireTaskOf(t, a.call("tasks/get", taskOp(created.TaskID)), false); got.Status != taskCompleted {
			t.Fatalf("after the job: %+v", got)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		const marker = "sleep 130.25"
		created := wireTaskOf(t, a.call("tools/call", bg("sleep 130.25 & sleep 130.25; wait")), true)
		eventually(t, "the job runs", func() bool { return len(testplugins.Matching(marker)) >= 2 })
		if got := wireTaskOf(t, a.call("tasks/cancel", taskOp(created.TaskID)), false); got.Status != taskCancelled {
			t.Fatalf("tasks/cancel: %+v", got)
		}
		eventually(t, "the job's whole tree is gone", func() bool { return len(testplugins.Matching(marker)) == 0 })
		if r := a.call("tools/call", bashTask("echo after", `{}`)); r.Error != nil {
			t.Fatalf("the next task: %+v", r.Error)
		}
	})
}

// A background task whose session ends while its job runs still reads
// the job as its owner (which waits out the grace): its result is the
// job's output, and no other owner appears.
func TestBackgroundTaskOutlivesItsSession(t *testing.T) {
	s, _ := serveCompWith(t, bashComp, func(o *Options) { o.ReleaseGrace = 5 * time.Second })
	a, _ := newRawClient(t, s, tasksCaps)
	created := wireTaskOf(t, a.call("tools/call", `{"name":"bash","arguments":{"command":"sleep 1; echo late","description":"test","run_in_background":true},"task":{}}`), true)
	owners := s.Owners()
	if len(owners) != 1 {
		t.Fatalf("owners %+v", owners)
	}
	a.close()
	var res mcp.Result
	eventually(t, "the task ends", func() bool {
		s.tasks.mu.Lock()
		defer s.tasks.mu.Unlock()
		tk := s.tasks.byOwner[owners[0].ID][created.TaskID]
		if tk != nil && tk.final() {
			res = tk.res
		}
		return res != nil
	})
	if r, ok := res.(*mcp.CallToolResult); !ok || !strings.Contains(resultText(r), "late") {
		t.Fatalf("the task's result: %#v", res)
	}
	if got := s.Owners(); len(got) != 1 || got[0].ID != owners[0].ID {
		t.Fatalf("owners after the task: %+v, want only %s", got, owners[0].ID)
	}
}
