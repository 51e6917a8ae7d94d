// Package subprocess is the service definition of ctx.subprocess as
// plugins see it: the key, the dsh.subprocess.v1 contract, and the Go seam
// over it ([Processes] and its errors; [Client] implements it over a
// connection, usually sdk.Host.Conn(subprocess.Key); [NewServer] serves an
// implementation, and only these adapters deal in status codes). The host
// provides it (package host/procs).
package subprocess

import (
	"context"
	"errors"

	"github.com/dshrun/dsh/core/output/outputv1"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Key is the service key: ctx.subprocess.
const Key = "subprocess"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = subprocessv1.Subprocess_ServiceDesc.ServiceName

// What the host gives a spawn request's grace_ms, max_output_bytes and
// max_spill_bytes when they are 0. An executor's config defaults to them
// too (its Resolve then sends them filled).
const (
	DefaultGraceMs        = 3_000
	DefaultMaxOutputBytes = 64_000
	DefaultMaxSpillBytes  = 64 << 20
)

// Processes is the ctx.subprocess seam as Go: the host's processes as a
// plugin reaches them. The owner of what a call starts or reaches is
// stamped by the host, never named by the request. Errors are the seam's
// own (ErrCannotStart, ErrNotFound), the caller's context error, or the
// sdk vocabulary.
type Processes interface {
	// Run spawns and waits. Cancelling ctx aborts the command (its whole
	// tree is killed). It fails only when the command cannot be started;
	// a non-zero exit, a timeout or an abort is a Result.
	Run(ctx context.Context, req *SpawnRequest) (*Result, error)
	// Start spawns and returns at once, with no timeout.
	Start(ctx context.Context, req *SpawnRequest) (*Started, error)
	// Read consumes the output produced since the previous read.
	Read(ctx context.Context, id string) (*ReadResult, error)
	// Kill terminates the tree; false once the process had finished.
	Kill(ctx context.Context, id string) (bool, error)
	// Wait blocks until the process has finished.
	Wait(ctx context.Context, id string) (*Result, error)
}

// The messages of the seam, as the contract defines them.
type (
	SpawnRequest = subprocessv1.SpawnRequest
	Result       = subprocessv1.Result
	Started      = subprocessv1.StartResponse
	ReadResult   = subprocessv1.ReadResponse
	Collected    = outputv1.Collected
	LimitHit     = outputv1.LimitHit
)

// The seam's errors: a command that cannot be started (an unusable working
// directory, a program not found), and a process id the caller cannot
// reach (unknown, forgotten, or another owner's).
var (
	ErrCannotStart = errors.New("cannot start")
	ErrNotFound    = errors.New("no such process")
	// ErrSandboxUnavailable is a spawn whose confinement the host does not
	// know or could not apply: nothing ran.
	ErrSandboxUnavailable = errors.New("sandbox unavailable")
)

// CannotStart is err as an ErrCannotStart.
func CannotStart(err error) error { return seam.Wrap(ErrCannotStart, err) }

// SandboxUnavailable is err as an ErrSandboxUnavailable.
func SandboxUnavailable(err error) error { return seam.Wrap(ErrSandboxUnavailable, err) }

// NotFound is err as an ErrNotFound.
func NotFound(err error) error { return seam.Wrap(ErrNotFound, err) }
