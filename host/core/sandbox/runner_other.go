//go:build !linux

package sandbox

import (
	"errors"

	"github.com/dshrun/dsh/core/sandbox"
)

// Options are what the host adds to every policy (see the Linux runner).
type Options struct {
	// Hide are directories a confined command must not see.
	Hide []string
}

// Confinement is the Linux runner's; elsewhere none can be prepared.
type Confinement struct{}

// Prepare fails: the in-process runner is Linux's, and a command is never
// run unconfined in its stead.
func Prepare(*sandbox.Policy, string, Options) (*Confinement, error) {
	return nil, errors.New("sandbox: the in-process runner needs Linux (namespaces, Landlock, seccomp)")
}

func (*Confinement) Confine() error { return errors.New("sandbox: no confinement on this system") }
func (*Confinement) Close() error   { return nil }
func (*Confinement) Stale() bool    { return true }
