// Package mcpserver is the Model Context Protocol front end of dsh, on the
// official go-sdk. It mirrors ctx.tools as MCP tools (tools/list_changed
// when plugins come and go); decides who owns what a client starts (a
// session, a resumable owner a client comes back to, or a stateless
// client's principal: owners.go); sends progress while a call runs, turns
// the client's cancellation into an abort, serves spill files as
// resources to their owner, asks the user when ctx.approval's policy says
// ask (elicit.go), shows the console the owners and the calls in flight,
// which it may cancel (inflight.go), and runs a tool call as an MCP task
// for a client that declares tasks and asks for one (tasks.go).
// Transports: stdio (stdio.go: dsh's own, which answers a malformed line
// and keeps serving), and streamable HTTP behind bearer tokens and an
// Origin check, with sessions and, for the stateless protocol, without
// (http.go).
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/notify"
)

// Options configures a Server.
type Options struct {
	Host    *host.Host
	Logger  hclog.Logger
	Version string
	// ProgressInterval is how often a running call reports progress to a
	// client that asked for it; 0 means 5s.
	ProgressInterval time.Duration
	// ReleaseGrace is how long an ended session's jobs survive it; 0 means
	// 10s.
	ReleaseGrace time.Duration
	// Resumable owners outlive their session for ResumeWithin, for a
	// client that comes back with its resume handle (owners.go).
	Resumable    bool
	ResumeWithin time.Duration
}

// Server serves one host's tools over MCP.
type Server struct {
	opts Options
	h    *host.Host
	log  hclog.Logger
	srv  *mcp.Server

	mu    sync.Mutex
	tools map[string]string // name -> description+schema, to notice changes

	// The owners (owners.go), under omu.
	omu         sync.Mutex
	owners      map[*mcp.ServerSession]*ownerRec // each live session's
	all         map[string]*ownerRec             // by id, until released
	byResume    map[string]*ownerRec             // by resume handle
	byPrincipal map[string]*ownerRec             // stateless clients', by principal
	ready       map[*mcp.ServerSession]bool      // sessions that sent notifications/initialized

	// The calls in flight and the console's signal (inflight.go).
	callSeq atomic.Uint64
	cmu     sync.Mutex
	calls   map[uint64]inflight
	agents  notify.Set

	amu  sync.Mutex
	asks map[string]*question // request state -> the question it answers (elicit.go)

	running  handlers    // tool handlers running (shutdown.go)
	stopping atomic.Bool // StopCalls was called

	tasks taskBook // tools/call as tasks (tasks.go)
}

// SpillScheme is the URI scheme of spill-file resources:
// dsh-spill://<owner>/<file>.
const SpillScheme = "dsh-spill"

const instructions = `dsh runs shell commands for you. Use the bash tool for one-shot commands (each in a fresh shell); background jobs are read with job_output, stopped with job_kill and listed with job_list (use it when you lost track of a job id, and before you finish, to stop what still runs). Long outputs are cut to their end; what was cut is kept in spill files where the disk allows (the result says whether a file holds all of it), which are also offered as resources.`

// New makes a Server that mirrors the host's tools until the host closes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 5 * time.Second
	}
	if opts.ReleaseGrace <= 0 {
		opts.ReleaseGrace = 10 * time.Second
	}
	s := &Server{opts: opts, h: opts.Host, log: opts.Logger, tools: map[string]string{}, owners: map[*mcp.ServerSession]*ownerRec{}, all: map[string]*ownerRec{}, byResume: map[string]*ownerRec{}, byPrincipal: map[string]*ownerRec{}, calls: map[uint64]inflight{}, ready: map[*mcp.ServerSession]bool{}, asks: map[string]*question{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "dsh", Title: "dsh", Version: opts.Version}, &mcp.ServerOptions{
		Instructions:       instructions,
		InitializedHandler: s.initialized,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{},
			Logging:   &mcp.LoggingCapabilities{},
		},
	})
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "spill",
		Title:       "Full output of a command",
		Description: "The whole output of a command whose result was truncated (only for the session that ran it).",
		URITemplate: SpillScheme + "://{owner}/{file}",
		MIMEType:    "text/plain",
	}, s.readSpill)
	// Cleaned first (inner), so that a text cleaned to nothing is still
	// written as an empty text.
	s.srv.AddReceivingMiddleware(cleanResults)
	s.srv.AddReceivingMiddleware(keepEmptyText)
	s.srv.AddSendingMiddleware(cleanSent)
	s.srv.AddReceivingMiddleware(s.noteInitialized)
	s.srv.AddReceivingMiddleware(s.announceOwner)
	s.srv.AddSendingMiddleware(s.quietUntilInitialized)
	// Last, so outermost: a task's call goes through all of the above.
	s.serveTasks()
	// Subscribed before the first Sync, so no change is missed.
	changes, _ := s.h.ToolChanges()
	s.Sync()
	go func() {
		for range changes {
			// A stopping host's tools go as its plugins stop: no client
			// needs to hear of that.
			if !s.stopping.Load() {
				s.Sync()
			}
		}
	}()
	return s
}

// MCP returns the underlying go-sdk server.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Sync mirrors the host's tools: new ones are added, changed ones
// replaced, gone ones removed; the SDK tells sessions the list changed.
func (s *Server) Sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, t := range s.h.Tools() {
		seen[t.Name] = true
		sig := t.Description + "\x00" + string(t.InputSchema) + "\x00" + t.Title
		if s.tools[t.Name] == sig {
			continue
		}
		s.tools[t.Name] = sig
		s.srv.AddTool(&mcp.Tool{
			Name:        t.Name,
			Title:       cleanText(t.Title),
			Description: cleanText(t.Description),
			InputSchema: t.InputSchema,
		}, s.handler(t.Name))
	}
	var gone []string
	for name := range s.tools {
		if !seen[name] {
			gone = append(gone, name)
			delete(s.tools, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
}

// A session hears nothing from the server before it has completed
// initialization: the go-sdk tells every session a list changed, even one
// whose client has yet to send notifications/initialized (or initialize),
// and a client reading its first line for the initialize response finds a
// notification instead. Such a session lists the tools after initializing
// anyway, so nothing it needs is lost.

// sessionlessVersion is the first protocol version without initialize: its
// sessions hear only what they subscribed to.
const sessionlessVersion = "2026-07-28"

// noteInitialized marks a session ready once it sends
// notifications/initialized after initialize (before the go-sdk handles
// it, so no notification sent from then on is held back).
func (s *Server) noteInitialized(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method == "notifications/initialized" && ss.InitializeParams() != nil {
			s.omu.Lock()
			s.ready[ss] = true
			s.omu.Unlock()
		}
		return next(ctx, method, req)
	}
}

// quietUntilInitialized drops the notifications to a session that is not
// ready.
func (s *Server) quietUntilInitialized(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && strings.HasPrefix(method, "notifications/") && !s.isReady(ss) {
			s.log.Debug("not sent to a session that has not initialized", "method", method)
			return nil, nil
		}
		return next(ctx, method, req)
	}
}

func (s *Server) isReady(ss *mcp.ServerSession) bool {
	if p := ss.InitializeParams(); p != nil && p.ProtocolVersion >= sessionlessVersion {
		return true
	}
	s.omu.Lock()
	defer s.omu.Unlock()
	return s.ready[ss]
}

func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.running.begin()
		defer s.running.end()
		owner := s.callOwner(ctx, req)
		// The user behind the call is asked through it (elicit.go); a
		// question that goes back with the result stops the call.
		callCtx, stop := context.WithCancel(ctx)
		defer stop()
		asker := s.newAsker(callCtx, req, owner, stop)
		n := s.track(owner, name, req.Params.Arguments, stop)
		call := host.ToolCall{Owner: owner, Tool: name, Arguments: req.Params.Arguments, Asker: asker}
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			call.Progress = host.Progress{
				Report:    s.reporter(ctx, req.Session, tok, name),
				Keepalive: s.opts.ProgressInterval,
			}
		}
		if req.Session != nil {
			// Messages for the user (hooks' system messages), not the model.
			call.Notify = func(msg string) {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "dsh", Data: msg})
			}
		}
		res, err := s.h.CallTool(callCtx, call)
		byConsole := s.untrack(n)
		if q := asker.inputRequired(); q != nil {
			return q, nil // what the stopped call did say is not the answer
		}
		if err != nil {
			// Bad arguments and failed calls are tool errors the model can
			// read, not protocol errors (the host's errors are worded for
			// it); a tool that is down says so in its own sentence.
			msg := "error: " + err.Error()
			var ue *host.UnavailableError
			if errors.As(err, &ue) {
				msg = ue.Error()
			}
			if byConsole {
				// What stopped it was the person at the console, not
				// the command: the context's own words say nothing.
				msg = cancelledNote
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}, nil
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, IsError: res.IsError}
		for _, fb := range res.Feedback {
			// Each its own item: the tool's text still ends with its exit line.
			out.Content = append(out.Content, &mcp.TextContent{Text: fb})
		}
		if byConsole {
			// The model did not cancel it, and must not think the command
			// failed by itself.
			out.Content = append(out.Content, &mcp.TextContent{Text: cancelledNote})
		}
		if len(res.Structured) > 0 && json.Valid(res.Structured) {
			out.StructuredContent = res.Structured
		}
		out.Content = append(out.Content, s.spillLinks(owner, res.Resources)...)
		return out, nil
	}
}

// reporter sends a running call's progress to a client that sent a
// progress token: how long it has run, and the latest line it printed as
// the message (the host paces the reports and cleans the line).
func (s *Server) reporter(ctx context.Context, ss *mcp.ServerSession, tok any, name string) func(line string) {
	start := time.Now()
	return func(line string) {
		secs := time.Since(start).Seconds()
		msg := line
		if msg == "" {
			msg = fmt.Sprintf("%s running for %.0fs", name, secs)
		}
		_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: secs, Message: msg})
	}
}

// spillLinks offers the spill files the result refers to as resource
// links the session can read.
func (s *Server) spillLinks(owner string, files []host.Resource) []mcp.Content {
	var links []mcp.Content
	for _, f := range files {
		name := filepath.Base(f.Path)
		link := &mcp.ResourceLink{
			URI:      spillURI(owner, name),
			Name:     name,
			Title:    f.Title + ": " + name,
			MIMEType: "text/plain",
		}
		if fi, err := os.Stat(f.Path); err == nil {
			size := fi.Size()
			link.Size = &size
		}
		links = append(links, link)
	}
	return links
}

func spillURI(owner, file string) string {
	return SpillScheme + "://" + procs.SafeName(owner) + "/" + url.PathEscape(file)
}

// readSpill serves a spill file to the session that owns it; to any other
// session it does not exist.
func (s *Server) readSpill(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != SpillScheme {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	owner := s.ownerOf(req)
	file := strings.TrimPrefix(u.Path, "/")
	if u.Host != procs.SafeName(owner) || file == "" || strings.ContainsAny(file, "/\\") || file == "." || file == ".." {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	b, err := os.ReadFile(filepath.Join(s.h.SpillDir(owner), file))
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: "text/plain"}
	if utf8.Valid(b) { // an empty file too: keepEmptyText writes its "text"
		c.Text = string(b)
	} else {
		c.MIMEType, c.Blob = "application/octet-stream", b
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// keepEmptyText makes an empty text resource a valid one. The go-sdk
// omits an empty "text" member, and a content with neither text nor blob
// is invalid (the TypeScript SDK rejects the whole result): a read whose
// contents include such an item is written with "text": "".
func keepEmptyText(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.ReadResourceResult); ok && err == nil {
			for _, c := range r.Contents {
				if c != nil && c.Text == "" && c.Blob == nil {
					return emptyTextResult{r}, nil
				}
			}
		}
		return res, err
	}
}

// emptyTextResult is a resources/read result written with an explicit
// empty "text" in each item that has neither text nor blob.
type emptyTextResult struct{ *mcp.ReadResourceResult }

func (r emptyTextResult) MarshalJSON() ([]byte, error) {
	b, err := r.ReadResourceResult.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("rewrite a resource result: %w", err)
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(top["contents"], &items); err != nil || len(items) != len(r.Contents) {
		return nil, fmt.Errorf("rewrite a resource result: contents do not match (%v)", err)
	}
	for i, c := range r.Contents {
		if c != nil && c.Text == "" && c.Blob == nil {
			items[i]["text"] = json.RawMessage(`""`)
		}
	}
	if top["contents"], err = json.Marshal(items); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

// RunStdio serves one session over in/out until in ends, the client stops
// reading out (a broken pipe ends the session as end of input does), or ctx
// is done. Malformed lines are answered and skipped (StdioTransport).
func (s *Server) RunStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	err := s.srv.Run(ctx, &StdioTransport{Reader: in, Writer: out, Logger: s.log.Named("stdio")})
	if errors.Is(err, syscall.EPIPE) {
		s.log.Debug("the client stopped reading", "error", err)
		return nil
	}
	return err
}
