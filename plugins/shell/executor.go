package shell

import (
	"context"
	"errors"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
)

// Executor is the ctx.shell seam as Go: what every executor implements and
// what consumers call (Client implements it over gRPC; NewServer serves an
// implementation). The rules of the seam are in the package doc. Errors are
// the seam's own (ErrInvalid, ErrCannotRun), the caller's context error, or
// the sdk vocabulary; status codes appear only in the adapters.
type Executor interface {
	Resolve(ctx context.Context, req *ExecRequest) (*ExecSpec, error)
	Run(ctx context.Context, spec *ExecSpec) (*RunResult, error)
	// Exec is Resolve then Run in one call.
	Exec(ctx context.Context, req *ExecRequest) (*RunResult, error)
	Start(ctx context.Context, spec *ExecSpec) (*Started, error)
	ReadOutput(ctx context.Context, id string) (*ProcessRead, error)
	Kill(ctx context.Context, id string) (bool, error)
	Wait(ctx context.Context, id string) (*ProcessState, error)
	// Limits are the defaults and caps Resolve applies, as the
	// executor's config resolved them.
	Limits(ctx context.Context) (*Limits, error)
}

// Started is a background process just started: its id (a ctx.subprocess
// handle), pid and sandbox facts.
type Started = shellv1.StartResponse

// The seam's errors: a request that cannot be resolved, and a command that
// cannot run at all (an unusable working directory, a missing shell). A
// command that ran and failed is a RunResult, never an error.
var (
	ErrInvalid   = errors.New("invalid request")
	ErrCannotRun = errors.New("cannot run")
	// ErrNotFound is a process id the caller cannot reach (unknown,
	// forgotten, or another owner's).
	ErrNotFound = errors.New("no such process")
	// ErrSandboxUnavailable (the seeds' SANDBOX_UNAVAILABLE) is a
	// sandboxing executor whose runner cannot confine the command:
	// nothing ran, and nothing runs unconfined instead.
	ErrSandboxUnavailable = errors.New("sandbox unavailable")
)

// Invalid is an ErrInvalid saying why in one plain sentence: a tool shows
// it to the model as it is.
func Invalid(msg string) error { return seam.New(ErrInvalid, msg) }

// CannotRun is an ErrCannotRun saying why.
func CannotRun(msg string) error { return seam.New(ErrCannotRun, msg) }

// SandboxUnavailable is an ErrSandboxUnavailable saying why.
func SandboxUnavailable(msg string) error { return seam.New(ErrSandboxUnavailable, msg) }

// NotFound is an ErrNotFound saying which.
func NotFound(msg string) error { return seam.New(ErrNotFound, msg) }
