// Package terminals is the service definition of ctx.terminals as plugins
// see it: the key, the dsh.terminals.v1 contract, and the Go seam over it
// ([Terminals] and its errors; [Client] implements it over a connection,
// usually sdk.Host.Conn(terminals.Key); [NewServer] serves an
// implementation, and only these adapters deal in status codes). The host
// provides it (package host/termsessions); backends register with it and
// serve the backend seam (package plugins/termbackend).
package terminals

import (
	"context"
	"errors"
	"time"

	"github.com/dshrun/dsh/core/terminals/terminalsv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Key is the service key: ctx.terminals.
const Key = "terminals"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = terminalsv1.Terminals_ServiceDesc.ServiceName

// MaxPerOwner is how many sessions one owner may hold at once.
const MaxPerOwner = 128

// MaxWait bounds a send's wait for the session to settle.
const MaxWait = 30 * time.Second

// MaxRunWait bounds a run's wait (a send with a capture) for its command
// to end.
const MaxRunWait = 10 * time.Minute

// DefaultBudget is the characters of the screen an answer carries when
// the request names none.
const DefaultBudget = 30000

// Why a send's wait ended (Sent.Wait).
const (
	// WaitStdinRead: the foreground process group is blocked reading the
	// terminal (seen in /proc, never guessed from silence).
	WaitStdinRead = "stdin_read"
	// WaitInferredIdle: no output for the idle bound, no read of the
	// terminal seen, and no process of the foreground seen running in that
	// time; or at once, a stopped foreground.
	WaitInferredIdle = "inferred_idle"
	// WaitTimeout: the send's wait ran out first.
	WaitTimeout = "timeout"
	// WaitSessionExit: the shell is gone.
	WaitSessionExit = "session_exit"
	// WaitMarker: a run's end marker was printed (runs only).
	WaitMarker = "marker"
)

// Signals are the signals a session's processes may be sent.
var Signals = []string{"SIGINT", "SIGTERM", "SIGKILL", "SIGTSTP", "SIGHUP"}

// Terminals is the ctx.terminals seam as Go: persistent terminal sessions
// of the agent whose tool call a request serves (the host stamps the
// owner; a request that serves no call is refused), and the backends that
// start them, published by name. Errors are the seam's own (the
// taxonomy: ErrDuplicateBackend, ErrDuplicateName, ErrForeignSession,
// ErrNoBackend, ErrNoSession, ErrOwnerNotLive, ErrSendActive,
// ErrServiceDisposing; and ErrTooMany, ErrInvalid with its case
// ErrShellKill), the backend's, the
// caller's context error, or the sdk vocabulary.
type Terminals interface {
	// RegisterBackend publishes the calling plugin as backend name: it
	// serves the backend seam. The registration lasts as long as the
	// plugin does.
	RegisterBackend(ctx context.Context, name, dialect string) error
	// Open starts a session through a backend.
	Open(ctx context.Context, req *OpenRequest) (*Session, error)
	// Send signals the foreground (when asked), then types text into the
	// session, submitting it as a line when asked, then waits up to
	// req.WaitMs for it to settle: the answer says why the wait ended
	// (one of the Wait* reasons) and what the screen shows.
	Send(ctx context.Context, req *SendRequest) (*Sent, error)
	// Read consumes the session's new output, waiting up to wait for some
	// when there is none, and looks at its screen: the viewport and the
	// unread scrollback within budget characters (0 means DefaultBudget).
	Read(ctx context.Context, id string, wait time.Duration, budget int) (*Output, error)
	// Signal sends signal (one of Signals) to the foreground process group
	// or the shell; a SIGKILL for the shell is refused (Close ends it).
	// SIGINT and SIGTSTP for the foreground first discard what was typed
	// and not read yet, as Ctrl-C and Ctrl-Z do (Send's signal too).
	Signal(ctx context.Context, id, signal string, target Target) (*Signalled, error)
	// Resize sets the session's terminal size.
	Resize(ctx context.Context, id string, cols, rows int) (*Session, error)
	// Close ends the session and returns once its process tree is gone.
	Close(ctx context.Context, id string) (*Session, error)
	// List is the owner's sessions, oldest first.
	List(ctx context.Context) ([]*Session, error)
}

// The messages of the seam, as the contract defines them.
type (
	OpenRequest = terminalsv1.OpenRequest
	SendRequest = terminalsv1.SendRequest
	Sent        = terminalsv1.Sent
	Capture     = terminalsv1.Capture
	Captured    = terminalsv1.Captured
	Screen      = terminalsv1.Screen
	Session     = terminalsv1.Session
	Output      = terminalsv1.Output
	Signalled   = terminalsv1.Signalled
	Target      = terminalsv1.Target
)

// The targets of a signal.
const (
	TargetForeground = terminalsv1.Target_TARGET_FOREGROUND
	TargetShell      = terminalsv1.Target_TARGET_SHELL
)

// The seam's errors. The first eight are the taxonomy of terminal errors;
// each travels as its own status code (see the contract).
var (
	// ErrDuplicateBackend: another plugin holds the backend name.
	ErrDuplicateBackend = errors.New("DUPLICATE_BACKEND")
	// ErrDuplicateName: the owner has a session by that name.
	ErrDuplicateName = errors.New("DUPLICATE_NAME")
	// ErrForeignSession: the session is another owner's. The host answers
	// such a request as ErrNoSession instead, which tells nothing of
	// another owner's sessions.
	ErrForeignSession = errors.New("FOREIGN_SESSION")
	// ErrNoBackend: no backend by that name is registered (or none is).
	ErrNoBackend = errors.New("NO_BACKEND")
	// ErrNoSession: the owner has no session by that id.
	ErrNoSession = errors.New("NO_SESSION")
	// ErrOwnerNotLive: the owner is gone (its session with the agent
	// ended): nothing more is opened for it.
	ErrOwnerNotLive = errors.New("OWNER_NOT_LIVE")
	// ErrSendActive: a send is in flight on the session.
	ErrSendActive = errors.New("SEND_ACTIVE")
	// ErrServiceDisposing: the host is shutting down.
	ErrServiceDisposing = errors.New("SERVICE_DISPOSING")

	// ErrTooMany: the owner holds MaxPerOwner sessions.
	ErrTooMany = errors.New("too many sessions")
	// ErrInvalid: a request that cannot be carried out as asked.
	ErrInvalid = errors.New("invalid request")
	// ErrShellKill: a SIGKILL for a session's shell, refused (closing the
	// session ends it); an ErrInvalid too, told apart by its reason.
	ErrShellKill = seam.Refine(ErrInvalid, ReasonShellKill)
)

// ReasonShellKill is the reason ErrShellKill travels with, beside
// INVALID_ARGUMENT.
const ReasonShellKill = "SHELL_KILL"

// Errorf is an error of kind saying msg.
func Errorf(kind error, msg string) error { return seam.New(kind, msg) }
