//go:build !linux

package subprocess

import (
	"errors"
	"os/exec"
)

// startConfined is Linux's: elsewhere a confined spawn is refused, never
// run unconfined.
func startConfined(*exec.Cmd, func() error) (func() error, error) {
	return nil, &confineError{errors.New("confining a command is not supported on this system")}
}
