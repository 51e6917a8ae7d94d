//go:build !linux

package confine

import (
	"errors"

	"github.com/dshrun/dsh/core/sandbox"
)

func prepareLandlock(*sandbox.Policy, string, Options) (confinement, error) {
	return nil, errors.New("confining a command needs Linux")
}

func findBubblewrap() (wrapper, error) { return nil, errors.New("bubblewrap needs Linux") }

func newSocketRule() (confinement, error) { return nil, errors.New("confining a command needs Linux") }
