// Package termbackend is the service definition of a terminal backend: the
// dsh.terminal.v1.Backend contract, and the Go seam over it ([Backend] and
// its errors; [Client] implements it over a connection; [NewServer] serves
// an implementation, and only these adapters deal in status codes).
//
// A backend owns the mechanics of a session's shell: the program and its
// environment (a prompt the registry recognises, re-asserted before every
// prompt), and how typed text becomes input. It spawns each session on a
// terminal of ctx.subprocess (SpawnTerminal) and writes to it there, so the
// terminal is the host's: it outlives the backend's reloads and crashes.
// The host's ctx.terminals (package core/terminals) holds the sessions
// (ids, owners, output, signals, cleanup) and calls the backend, each call
// acting for the session's owner; a backend plugin registers with it under
// a name (terminals.Client.RegisterBackend) and keeps nothing per session.
// plugins/terminal-bash is the bash backend.
package termbackend

import (
	"context"
	"errors"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/plugins/termbackend/terminalv1"
)

// ServiceName is the gRPC service a backend plugin serves.
var ServiceName = terminalv1.Backend_ServiceDesc.ServiceName

// Backend is the backend seam as Go. Errors are the seam's own
// (ErrCannotStart, ErrNotFound), the caller's context error, or the sdk
// vocabulary.
type Backend interface {
	// Start spawns a session's program on a new terminal (acting for the
	// caller's owner) and says how its shell speaks.
	Start(ctx context.Context, req *StartRequest) (*Started, error)
	// Send types text into the terminal of process id, submitting it as a
	// line when asked; false when the program had exited.
	Send(ctx context.Context, req *SendRequest) (bool, error)
}

// The messages of the seam, as the contract defines them.
type (
	StartRequest = terminalv1.StartRequest
	Started      = terminalv1.Started
	Dialect      = terminalv1.Dialect
	SendRequest  = terminalv1.SendRequest
)

// The seam's errors: a session that cannot be started (a working directory
// that is not there, a missing shell), and a terminal the backend cannot
// reach (gone, or not the caller's).
var (
	ErrCannotStart = errors.New("cannot start")
	ErrNotFound    = errors.New("no such terminal")
)

// CannotStart is err as an ErrCannotStart.
func CannotStart(err error) error { return seam.Wrap(ErrCannotStart, err) }

// NotFound is err as an ErrNotFound.
func NotFound(err error) error { return seam.Wrap(ErrNotFound, err) }
