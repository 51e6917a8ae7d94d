package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/randid"
)

// Tasks (MCP 2025-11-25, experimental): a client that declares the tasks
// capability may ask for a tool call to run as a task. The call is
// answered at once with the task; it runs on, detached from its request,
// and the client polls it (tasks/get), waits for its result (tasks/result),
// lists its tasks (tasks/list) or cancels one (tasks/cancel).
//
// The go-sdk (v1.8.0) knows nothing of tasks: it drops the client's
// capabilities.tasks and the task member of tools/call as it parses them,
// and has no place for the server's capabilities.tasks or a tool's
// execution. So dsh's own transports move those two members into _meta
// before the go-sdk parses the message (rewriteTaskMessage), where they
// survive; a receiving middleware (taskMiddleware) adds what the go-sdk
// cannot write to the initialize and tools/list results, and starts a
// call asked for as a task; the tasks/* methods are custom methods.
//
// A task is its session's owner's: to any other session its id is
// unknown. It runs through the same path as a plain call (approval,
// cleaning, spill links, the console's books), with the same owner, on a
// context of its own that only tasks/cancel, the release of its owner and
// the host's stop end.

// Where the transports put what the go-sdk would drop.
const (
	taskMetaKey = "dev.dsh/task"  // tools/call: the params' task member
	taskCapsKey = "dev.dsh/tasks" // initialize: the client's capabilities.tasks
)

// relatedTaskKey marks a tasks/result answer with its task (the spec's
// io.modelcontextprotocol/related-task).
const relatedTaskKey = "io.modelcontextprotocol/related-task"

const (
	// A finished task is kept this long (the client's ttl, at most
	// maxTaskTTL) after it ended, then forgotten.
	defaultTaskTTL = 10 * time.Minute
	maxTaskTTL     = time.Hour
	// taskPoll is the interval the client is told to poll at.
	taskPoll = 500 * time.Millisecond
	// A session may run this many tasks at once, and keep this many in
	// all (the oldest finished ones go first).
	maxLiveTasks = 32
	maxKeptTasks = 256
)

// Task statuses. A question for the user is asked by elicitation, as for
// a plain call, while the task is input_required.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// taskBook holds the tasks of every owner.
type taskBook struct {
	mu      sync.Mutex
	byOwner map[string]map[string]*task
	// Limits; zero means the constants (tests set them lower).
	maxLive, maxKept int
}

// task is one task-augmented tools/call.
type task struct {
	id, owner string
	created   time.Time
	ttl       time.Duration
	cancel    context.CancelFunc
	done      chan struct{} // closed once the call has returned
	// known is closed once the client has named the task (tasks/get,
	// result, cancel or list): it has the task's id, and a question
	// about the task may reach it.
	known     chan struct{}
	knownOnce sync.Once

	// Guarded by taskBook.mu.
	status  string
	message string
	updated time.Time
	ended   time.Time // when it reached a final status
	res     mcp.Result
	err     error
}

// wireTask is a task as the protocol writes it.
type wireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

func (t *task) wire() wireTask {
	return wireTask{
		TaskID:        t.id,
		Status:        t.status,
		StatusMessage: t.message,
		CreatedAt:     t.created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		TTL:           t.ttl.Milliseconds(),
		PollInterval:  taskPoll.Milliseconds(),
	}
}

func (t *task) final() bool {
	return t.status != taskWorking && t.status != taskInputRequired
}

func (t *task) markKnown() { t.knownOnce.Do(func() { close(t.known) }) }

// taskKey carries a task to the calls it makes: its owner (by the time a
// task reads its job, the session that asked for it may have ended, its
// owner waiting out the grace or for its client to come back, and the
// session would name no owner), and its status while it asks the user.
type taskKey struct{}

// awaitClient marks t input_required for a question, and waits (bounded by
// ctx) until the client has named the task: a question sent before the
// answer that creates the task would reach a client that does not know
// the task yet. done sets t working again.
func (b *taskBook) awaitClient(ctx context.Context, t *task) (done func(), err error) {
	b.mu.Lock()
	if !t.final() {
		t.status, t.message, t.updated = taskInputRequired, "waiting for the user's answer (tasks/result receives the question)", time.Now()
	}
	b.mu.Unlock()
	done = func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if t.status == taskInputRequired {
			t.status, t.message, t.updated = taskWorking, "", time.Now()
		}
	}
	select {
	case <-t.known:
		return done, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// serveTasks installs the tasks: the middleware (outermost, so a task's
// call goes through every other one) and the tasks/* methods.
func (s *Server) serveTasks() {
	s.tasks.byOwner = map[string]map[string]*task{}
	s.srv.AddReceivingMiddleware(s.taskMiddleware)
	for method, h := range map[string]func(context.Context, *mcp.ServerSession, *taskParams) (mcp.Result, error){
		"tasks/get":    s.getTask,
		"tasks/result": s.taskResult,
		"tasks/cancel": s.cancelTask,
	} {
		if err := mcp.AddReceivingCustomMethod(s.srv, method, h); err != nil {
			panic(err) // only if the go-sdk made the method standard
		}
	}
	if err := mcp.AddReceivingCustomMethod(s.srv, "tasks/list", s.listTasks); err != nil {
		panic(err)
	}
}

// tasksOn reports whether ss's client declared tasks in initialize, on a
// protocol version that has them as 2025-11-25 does.
func tasksOn(ss *mcp.ServerSession) bool {
	return ss != nil && asksTasks(ss.InitializeParams())
}

// asksTasks reports whether an initialize declared tasks on a version
// that has them (the one asked for: the initialize result and every later
// request judge by the same).
func asksTasks(p *mcp.InitializeParams) bool {
	return p != nil && p.Meta[taskCapsKey] != nil && p.ProtocolVersion >= tasksVersion && p.ProtocolVersion < sessionlessVersion
}

// tasksVersion is the protocol version that brought tasks.
const tasksVersion = "2025-11-25"

func (s *Server) taskMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			p, _ := req.GetParams().(*mcp.InitializeParams)
			if r, ok := res.(*mcp.InitializeResult); ok && err == nil && asksTasks(p) {
				return taskInitResult{r}, nil
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.ListToolsResult); ok && err == nil && tasksOn(ss) {
				return taskToolsResult{r}, nil
			}
			return res, err
		case "tools/call":
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p.Meta[taskMetaKey] != nil && tasksOn(ss) {
				return s.startTask(ss, p, req, next)
			}
		}
		return next(ctx, method, req)
	}
}

// startTask starts a task-augmented call and answers with its task.
func (s *Server) startTask(ss *mcp.ServerSession, p *mcp.CallToolParamsRaw, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	s.mu.Lock()
	_, known := s.tools[p.Name]
	s.mu.Unlock()
	if !known {
		// Refused at once, as a plain call would be, rather than as a
		// task that fails.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", p.Name)}
	}
	var meta struct {
		TTL *float64 `json:"ttl"`
	}
	if b, err := json.Marshal(p.Meta[taskMetaKey]); err == nil {
		_ = json.Unmarshal(b, &meta)
	}
	ttl := defaultTaskTTL
	if meta.TTL != nil && *meta.TTL > 0 {
		// Compared as milliseconds first: a huge ttl would overflow a
		// Duration.
		ttl = maxTaskTTL
		if *meta.TTL < float64(maxTaskTTL.Milliseconds()) {
			ttl = time.Duration(*meta.TTL * float64(time.Millisecond))
		}
	}
	// The call's own parameters, without the task: it is not asked again.
	m := mcp.Meta{}
	for k, v := range p.Meta {
		if k != taskMetaKey {
			m[k] = v
		}
	}
	p.Meta = m
	owner := s.ownerOf(req)
	now := time.Now()
	// Its own context: the request is answered now, and a client
	// cancelling it (or its HTTP stream ending) must not stop the task.
	t := &task{id: randid.New(), owner: owner, created: now, updated: now, ttl: ttl, done: make(chan struct{}), known: make(chan struct{}), status: taskWorking}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), taskKey{}, t))
	t.cancel = cancel
	if err := s.tasks.add(t); err != nil {
		cancel()
		return nil, err
	}
	s.log.Debug("task started", "owner", owner, "task", t.id, "tool", p.Name)
	go func() {
		defer close(t.done)
		defer cancel()
		res, err := next(ctx, "tools/call", req)
		if job := backgroundJob(p, res, err); job != "" {
			res, err = s.followJob(ctx, ss, t, job, next)
		}
		s.tasks.finish(t, res, err)
		s.log.Debug("task ended", "owner", owner, "task", t.id, "status", t.status)
	}()
	s.tasks.mu.Lock()
	w := t.wire()
	s.tasks.mu.Unlock()
	return &createTaskResult{Task: w}, nil
}

// callOwner is the owner a tool call runs for: its task's, or its
// session's.
func (s *Server) callOwner(ctx context.Context, req mcp.Request) string {
	if t, ok := ctx.Value(taskKey{}).(*task); ok {
		return t.owner
	}
	return s.ownerOf(req)
}

// backgroundJob is the job a call started with run_in_background, as its
// result names it (structuredContent.jobId); "" for any other call.
func backgroundJob(p *mcp.CallToolParamsRaw, res mcp.Result, err error) string {
	r, ok := res.(*mcp.CallToolResult)
	if err != nil || !ok || r.IsError || r.StructuredContent == nil {
		return ""
	}
	var args struct {
		Background bool `json:"run_in_background"`
	}
	if json.Unmarshal(p.Arguments, &args) != nil || !args.Background {
		return ""
	}
	var out struct {
		JobID string `json:"jobId"`
	}
	b, _ := json.Marshal(r.StructuredContent)
	if json.Unmarshal(b, &out) != nil {
		return ""
	}
	return out.JobID
}

// followJob keeps the task of a background command working until its job
// ends, and answers it with the job's last read: job_output, which
// consumes what the agent has not read yet, as job_output always does (a
// read of the agent's own meanwhile is not repeated). Cancelling the task
// kills the job and its whole tree, as job_kill does.
func (s *Server) followJob(ctx context.Context, ss *mcp.ServerSession, t *task, job string, next mcp.MethodHandler) (mcp.Result, error) {
	s.tasks.mu.Lock()
	if !t.final() { // a cancel may have come first
		t.message, t.updated = "background job "+job+" is running", time.Now()
	}
	s.tasks.mu.Unlock()
	err := s.h.WaitJob(ctx, t.owner, job)
	if ctx.Err() != nil {
		kctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		if err := s.h.KillJob(kctx, t.owner, job); err != nil {
			s.log.Warn("kill of a cancelled task's job", "owner", t.owner, "task", t.id, "job", job, "error", err)
		}
		return nil, ctx.Err()
	}
	if err != nil {
		// Forgotten: the agent read its end itself; the read says so.
		s.log.Debug("a task's job was read to its end by the agent", "task", t.id, "job", job)
	}
	args, _ := json.Marshal(map[string]string{"job_id": job})
	read := &mcp.CallToolRequest{Session: ss, Params: &mcp.CallToolParamsRaw{Name: "job_output", Arguments: args}}
	return next(ctx, "tools/call", read)
}

func (b *taskBook) limits() (live, kept int) {
	live, kept = b.maxLive, b.maxKept
	if live <= 0 {
		live = maxLiveTasks
	}
	if kept <= 0 {
		kept = maxKeptTasks
	}
	return live, kept
}

// add enters t, or says why its owner may not start another task.
func (b *taskBook) add(t *task) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	maxLive, maxKept := b.limits() // the tests set them under the lock
	b.sweepLocked(t.created)
	mine := b.byOwner[t.owner]
	live := 0
	var finished []*task
	for _, o := range mine {
		if o.final() {
			finished = append(finished, o)
		} else {
			live++
		}
	}
	if live >= maxLive {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("dsh: this session already runs %d tasks, the most it may; wait for one to end or cancel one (tasks/cancel), then ask again", live)}
	}
	if len(mine) >= maxKept {
		sort.Slice(finished, func(i, j int) bool { return finished[i].ended.Before(finished[j].ended) })
		// Only finished ones go: with live ones near the cap there may be
		// fewer than the excess.
		for _, o := range finished[:min(len(finished), len(mine)-maxKept+1)] {
			delete(mine, o.id)
		}
	}
	if mine == nil {
		mine = map[string]*task{}
		b.byOwner[t.owner] = mine
	}
	mine[t.id] = t
	return nil
}

// finish records how t's call ended; a task already cancelled stays so.
func (b *taskBook) finish(t *task, res mcp.Result, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.final() {
		return
	}
	now := time.Now()
	t.updated, t.ended = now, now
	t.res, t.err = res, err
	switch {
	case err != nil:
		// A tool's own failure is a result (isError); this is the call
		// failing as a request.
		t.status, t.message = taskFailed, err.Error()
	case res == nil:
		t.status, t.message = taskFailed, "the call returned no result"
	default:
		t.status = taskCompleted
	}
}

// find returns owner's task id, or nil: another owner's task is as
// unknown as one that never was.
func (b *taskBook) find(owner, id string) *task {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepLocked(time.Now())
	return b.byOwner[owner][id]
}

// sweepLocked forgets the tasks whose ttl has run out since they ended.
func (b *taskBook) sweepLocked(now time.Time) {
	for owner, mine := range b.byOwner {
		for id, t := range mine {
			if t.final() && now.Sub(t.ended) > t.ttl {
				delete(mine, id)
			}
		}
		if len(mine) == 0 {
			delete(b.byOwner, owner)
		}
	}
}

// endTasks cancels the running tasks of an owner being released and
// forgets all its tasks.
func (s *Server) endTasks(owner string) {
	s.tasks.mu.Lock()
	mine := s.tasks.byOwner[owner]
	delete(s.tasks.byOwner, owner)
	now := time.Now()
	for _, t := range mine {
		if !t.final() {
			t.status, t.message, t.updated, t.ended = taskCancelled, "the session ended", now, now
		}
	}
	s.tasks.mu.Unlock()
	for _, t := range mine {
		t.cancel()
	}
}

// taskParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type listParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

func unknownTask(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("dsh: no task %q in this session (finished tasks are kept for their ttl)", id)}
}

func (s *Server) lookup(ss *mcp.ServerSession, p *taskParams) (*task, error) {
	if p == nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `dsh: "taskId" is required`}
	}
	if !tasksOn(ss) {
		return nil, unknownTask(p.TaskID)
	}
	t := s.tasks.find(s.owner(ss, nil), p.TaskID)
	if t == nil {
		return nil, unknownTask(p.TaskID)
	}
	t.markKnown()
	return t, nil
}

func (s *Server) getTask(_ context.Context, ss *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	t, err := s.lookup(ss, p)
	if err != nil {
		return nil, err
	}
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	return &taskState{wireTask: t.wire()}, nil
}

// taskResult waits (as long as the request lasts) for the task's end and
// answers what the call would have: its result, or its error.
func (s *Server) taskResult(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	t, err := s.lookup(ss, p)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.tasks.mu.Lock()
	status, res, callErr := t.status, t.res, t.err
	s.tasks.mu.Unlock()
	switch {
	case status == taskCancelled:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("dsh: task %q was cancelled; it has no result", t.id)}
	case callErr != nil:
		return nil, callErr
	}
	r, ok := res.(*mcp.CallToolResult)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("dsh: task %q ended without a tool result", t.id)}
	}
	out := *r // the stored result stays as it was
	out.Meta = mcp.Meta{}
	for k, v := range r.Meta {
		out.Meta[k] = v
	}
	out.Meta[relatedTaskKey] = map[string]string{"taskId": t.id}
	return &out, nil
}

// cancelTask stops a running task: its context ends, which aborts the
// call as a client's cancellation does (the host stops the command). The
// answer waits, briefly, until the call has returned.
func (s *Server) cancelTask(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	t, err := s.lookup(ss, p)
	if err != nil {
		return nil, err
	}
	s.tasks.mu.Lock()
	if t.final() {
		status := t.status
		s.tasks.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("dsh: task %q has already ended (%s)", t.id, status)}
	}
	now := time.Now()
	t.status, t.message, t.updated, t.ended = taskCancelled, "cancelled by the client", now, now
	s.tasks.mu.Unlock()
	s.log.Debug("task cancelled", "owner", t.owner, "task", t.id)
	t.cancel()
	select {
	case <-t.done:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	return &taskState{wireTask: t.wire()}, nil
}

// listTasks lists the session's tasks, oldest first, in one page (a
// session keeps at most maxKeptTasks).
func (s *Server) listTasks(_ context.Context, ss *mcp.ServerSession, _ *listParams) (*listTasksResult, error) {
	out := &listTasksResult{Tasks: []wireTask{}}
	if !tasksOn(ss) {
		return out, nil
	}
	owner := s.owner(ss, nil)
	s.tasks.mu.Lock()
	s.tasks.sweepLocked(time.Now())
	var mine []*task
	for _, t := range s.tasks.byOwner[owner] {
		mine = append(mine, t)
	}
	sort.Slice(mine, func(i, j int) bool {
		return mine[i].created.Before(mine[j].created) || mine[i].created.Equal(mine[j].created) && mine[i].id < mine[j].id
	})
	for _, t := range mine {
		t.markKnown()
		out.Tasks = append(out.Tasks, t.wire())
	}
	s.tasks.mu.Unlock()
	return out, nil
}

// createTaskResult answers a task-augmented tools/call.
type createTaskResult struct {
	mcp.ResultBase
	Task wireTask `json:"task"`
}

// taskState answers tasks/get and tasks/cancel: the task itself.
type taskState struct {
	mcp.ResultBase
	wireTask
}

type listTasksResult struct {
	mcp.ResultBase
	Tasks []wireTask `json:"tasks"`
}

// taskCaps is the server's tasks capability: tools/call may be a task,
// and tasks may be listed and cancelled.
var taskCaps = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// taskInitResult is an initialize result with capabilities.tasks.
type taskInitResult struct{ *mcp.InitializeResult }

func (r taskInitResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.InitializeResult)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("add tasks to the initialize result: %w", err)
	}
	caps := map[string]json.RawMessage{}
	if c := top["capabilities"]; c != nil {
		if err := json.Unmarshal(c, &caps); err != nil {
			return nil, fmt.Errorf("add tasks to the initialize result: %w", err)
		}
	}
	caps["tasks"] = taskCaps
	if top["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

// taskToolsResult is a tools/list result whose tools say they may run as
// tasks.
type taskToolsResult struct{ *mcp.ListToolsResult }

var optionalTask = json.RawMessage(`{"taskSupport":"optional"}`)

func (r taskToolsResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.ListToolsResult)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("add task support to the tools: %w", err)
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(top["tools"], &tools); err != nil {
		return nil, fmt.Errorf("add task support to the tools: %w", err)
	}
	for _, t := range tools {
		t["execution"] = optionalTask
	}
	if top["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

// mentionsTask is the cheap look before a parse: only a message with a
// "task" (tools/call) or "tasks" (initialize) member can need a rewrite;
// the tasks/* methods themselves, polled every half second, do not.
func mentionsTask(b []byte) bool {
	return bytes.Contains(b, []byte(`"task"`)) || bytes.Contains(b, []byte(`"tasks"`))
}

// rewriteTaskMessage moves what the go-sdk would drop into _meta: the
// task member of a tools/call's params, and the capabilities.tasks of an
// initialize. Anything else, or anything it cannot read, it returns as it
// came.
func rewriteTaskMessage(method string, params json.RawMessage) json.RawMessage {
	if method != "tools/call" && method != "initialize" || !mentionsTask(params) {
		return params
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params
	}
	var key string
	var value json.RawMessage
	switch method {
	case "tools/call":
		value, key = p["task"], taskMetaKey
		delete(p, "task")
	case "initialize":
		var caps map[string]json.RawMessage
		if json.Unmarshal(p["capabilities"], &caps) != nil {
			return params
		}
		value, key = caps["tasks"], taskCapsKey
	}
	if len(value) == 0 || value[0] != '{' {
		return params
	}
	meta := map[string]json.RawMessage{}
	if m := p["_meta"]; m != nil && json.Unmarshal(m, &meta) != nil {
		return params
	}
	meta[key] = value
	var err error
	if p["_meta"], err = json.Marshal(meta); err != nil {
		return params
	}
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// rewriteTaskRequest is rewriteTaskMessage for a decoded message.
func rewriteTaskRequest(msg jsonrpc.Message) jsonrpc.Message {
	if req, ok := msg.(*jsonrpc.Request); ok {
		req.Params = rewriteTaskMessage(req.Method, req.Params)
	}
	return msg
}

// rewriteTaskBody is rewriteTaskMessage for an HTTP POST body holding one
// message.
func rewriteTaskBody(body []byte) []byte {
	if !mentionsTask(body) {
		return body
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	var method string
	if json.Unmarshal(m["method"], &method) != nil || m["params"] == nil {
		return body
	}
	p := rewriteTaskMessage(method, m["params"])
	if bytes.Equal(p, m["params"]) {
		return body
	}
	m["params"] = p
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}
