// Package jobs is the service definition of ctx.jobs as plugins see it:
// the key, the dsh.jobs.v1 contract, and the Go seam over it ([Jobs] and
// its errors; [Client] implements it over a connection, usually
// sdk.Host.Conn(jobs.Key); [NewServer] serves an implementation, and only
// these adapters deal in status codes). The host provides it (package
// host/jobtable).
package jobs

import (
	"context"
	"errors"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/output/outputv1"
)

// Key is the service key: ctx.jobs.
const Key = "jobs"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = jobsv1.Jobs_ServiceDesc.ServiceName

// DefaultShellKey is the executor a registration that names none means:
// ctx.shell (the key of package plugins/shell, spelled out so that this
// contract does not depend on that one).
const DefaultShellKey = "shell"

// Jobs is the ctx.jobs seam as Go: background jobs of the agent whose
// tool call a request serves (the host stamps the owner; a request that
// serves no call is refused, and owner fields in requests are ignored).
// Errors are the seam's own (ErrNotFound, ErrForeign, ErrTooMany), the
// executor's (reads go through it), the caller's context error, or the
// sdk vocabulary.
type Jobs interface {
	// Register adopts a process the caller started through an executor
	// (RegisterRequest.shell_key, ctx.shell when empty) as a job.
	Register(ctx context.Context, req *RegisterRequest) (*Job, error)
	// Read consumes the job's new output; the read that returns a
	// finished job's final output forgets the job.
	Read(ctx context.Context, id string) (*JobRead, error)
	// Kill terminates the job's tree; false once it had finished.
	Kill(ctx context.Context, id string) (bool, error)
	// List is the owner's jobs, oldest first.
	List(ctx context.Context) ([]*Job, error)
}

// The messages of the seam, as the contract defines them.
type (
	RegisterRequest = jobsv1.RegisterRequest
	Job             = jobsv1.Job
	JobRead         = jobsv1.JobRead
	Collected       = outputv1.Collected
	LimitHit        = outputv1.LimitHit
	SandboxInfo     = outputv1.SandboxInfo
)

// The seam's errors: a job id the owner has not (unknown, or forgotten
// once its final output was read), another owner's job, and the cap on
// live jobs reached.
var (
	ErrNotFound = errors.New("no such job")
	// ErrForeign: the job is another owner's. The host answers such a
	// request as ErrNotFound instead, word for word, which tells nothing
	// of another owner's jobs.
	ErrForeign = errors.New("job belongs to another owner")
	ErrTooMany = errors.New("too many live jobs")
)
