//go:build !linux

package confine

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/dshrun/dsh/core/sandbox"
)

// Bubblewrap is the bubblewrap runner: it wraps argv in a bwrap command
// line. bubblewrap is Linux only (namespaces); elsewhere nothing is found.
type Bubblewrap struct{ Path string } // the bwrap binary

// FindBubblewrap fails off Linux.
func FindBubblewrap() (*Bubblewrap, error) {
	return nil, fmt.Errorf("bubblewrap runs on Linux only, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Wrap fails off Linux.
func (b *Bubblewrap) Wrap(*sandbox.Policy, string, Options, []string) ([]string, error) {
	return nil, fmt.Errorf("bubblewrap runs on Linux only, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func (b *Bubblewrap) wrap(p *sandbox.Policy, mode string, opt Options, argv []string, _ bool) ([]string, error) {
	return b.Wrap(p, mode, opt, argv)
}

// Vanished is false off Linux: nothing was wrapped.
func (b *Bubblewrap) Vanished([]string, int, []byte) bool { return false }
