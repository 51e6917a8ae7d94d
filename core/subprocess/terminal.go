package subprocess

import (
	"context"
	"errors"
	"time"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Terminals is the terminal half of ctx.subprocess: commands on a
// pseudo-terminal the host holds. A terminal is a process like any other
// (Processes' Kill and Wait take its id; it dies with its owner and with
// the host), with input, a size, signals for its foreground process group,
// and one bounded output. Errors are the seam's own (ErrCannotStart,
// ErrNotFound, ErrSandboxUnavailable, ErrInvalid), the caller's context
// error, or the sdk vocabulary.
type Terminals interface {
	// SpawnTerminal starts a command on a new terminal, with no timeout.
	SpawnTerminal(ctx context.Context, req *TerminalRequest) (*Started, error)
	// WriteTerminal writes input as if typed; false once the program had
	// exited (nothing was written).
	WriteTerminal(ctx context.Context, id string, data []byte) (bool, error)
	// ReadTerminal consumes what the terminal printed since the previous
	// read, waiting up to wait for some when there is none.
	ReadTerminal(ctx context.Context, id string, wait time.Duration) (*TerminalOutput, error)
	// ResizeTerminal sets the terminal's size.
	ResizeTerminal(ctx context.Context, id string, cols, rows int) error
	// SignalTerminal signals the foreground process group or the main
	// process; Signalled is false once the program had exited.
	SignalTerminal(ctx context.Context, id, signal string, target TerminalTarget) (*TerminalSignalled, error)
}

// The terminal messages of the seam, as the contract defines them.
type (
	TerminalRequest   = subprocessv1.TerminalRequest
	TerminalOutput    = subprocessv1.TerminalOutput
	TerminalSignalled = subprocessv1.TerminalSignalled
	TerminalTarget    = subprocessv1.TerminalTarget
)

// The targets of SignalTerminal.
const (
	TargetForeground = subprocessv1.TerminalTarget_TERMINAL_TARGET_FOREGROUND
	TargetMain       = subprocessv1.TerminalTarget_TERMINAL_TARGET_MAIN
)

// ErrInvalid is a terminal request that cannot be carried out as asked:
// an unknown signal, a size out of range, a process that is no terminal.
var ErrInvalid = errors.New("invalid request")

// Invalid is an ErrInvalid saying msg.
func Invalid(msg string) error { return seam.New(ErrInvalid, msg) }
