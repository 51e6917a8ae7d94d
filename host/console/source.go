package console

import (
	"context"
	"time"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/hostlog"
)

// Source is what the console reads from and acts on: the host and its MCP
// server. The types are the API's JSON; an adapter converts the host's,
// except the graph's and the log's: the host's EntryView and hostlog.Line
// are the API's shapes already.
//
// The change channels and subscriptions are only taken while a page holds
// an events stream open; nothing here is called while no page is open.
type Source interface {
	// Version is the host's version; File the composition file.
	Version() string
	File() string

	// Graph is every entry's state; Changes signals any change of it
	// (state, reload, crash, restart) until stop is called.
	Graph() []host.EntryView
	Changes() (changes <-chan struct{}, stop func())
	// Reload restarts one entry (make-before-break for providers).
	Reload(ctx context.Context, id string) error

	// CompositionText is the composition file's text.
	CompositionText() (file string, text []byte, err error)
	// CheckComposition parses and plans text; nothing is applied.
	CheckComposition(ctx context.Context, text []byte) []Problem
	// ApplyComposition writes the file only if text checks, then applies
	// it as a hot reload.
	ApplyComposition(ctx context.Context, text []byte) ([]Problem, error)

	// Logs is the newest n lines of entry ("" = all; the host's own lines
	// have Entry "") at level or above ("" = all), newest last.
	Logs(entry, level string, n int) []hostlog.Line
	SubscribeLogs() (lines <-chan hostlog.Line, stop func())

	// Approvals are the questions waiting for an answer.
	Approvals() []host.Question
	ApprovalChanges() (changes <-chan struct{}, stop func())
	AnswerApproval(id string, approve bool) error

	// Agents is every owner (an MCP session or the stdio client) with its
	// calls in flight, jobs and terminals; AgentChanges signals a call that
	// began or ended, an owner that came or went, a job's change.
	Agents() []Owner
	AgentChanges() (changes <-chan struct{}, stop func())
	// CancelCall cancels a call in flight; false when there is none by id.
	CancelCall(id string) bool
	// KillJob ends the job's whole process tree.
	KillJob(ctx context.Context, owner, id string) error
	// WatchJobOutput gives the job's output from its start without
	// consuming it, and returns the job's end state when it ends or ctx
	// is done.
	WatchJobOutput(ctx context.Context, owner, id string, out func(chunk []byte)) (JobView, error)
	// WatchTerminal gives a repaint of the screen, then live bytes, until
	// the terminal closes or ctx is done.
	WatchTerminal(ctx context.Context, owner, id string, out func(chunk []byte)) error
	WriteTerminal(ctx context.Context, owner, id string, data []byte) error
}

// Problem is one problem found in a composition text.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

// Owner is one agent: an MCP session with what it runs.
type Owner struct {
	ID        string         `json:"id"`
	Client    string         `json:"client"`
	Since     time.Time      `json:"since"`
	Calls     []CallView     `json:"calls"`
	Jobs      []JobView      `json:"jobs"`
	Terminals []TerminalView `json:"terminals"`
}

// CallView is a tool call in flight.
type CallView struct {
	ID        string    `json:"id"`
	Tool      string    `json:"tool"`
	Command   string    `json:"command"`
	StartedAt time.Time `json:"startedAt"`
	ElapsedMs int64     `json:"elapsedMs"`
}

// JobView is a background job.
type JobView struct {
	ID          string    `json:"id"`
	Command     string    `json:"command"`
	State       string    `json:"state"`
	ExitCode    int       `json:"exitCode"`
	StartedAt   time.Time `json:"startedAt"`
	OutputBytes int64     `json:"outputBytes"`
}

// TerminalView is an interactive terminal.
type TerminalView struct {
	ID      string `json:"id"`
	Command string `json:"command"`
	Cols    int    `json:"cols"`
	Rows    int    `json:"rows"`
	Alive   bool   `json:"alive"`
}

// ErrNotFound is what a Source returns (wrapped or not) for an entry,
// job, terminal or question that does not exist: the API answers 404.
var ErrNotFound = errNotFound{}

type errNotFound struct{}

func (errNotFound) Error() string { return "not found" }
