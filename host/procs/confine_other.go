//go:build !linux

package procs

import (
	"errors"
	"os/exec"
)

// startLocked starts cmd. Confining is Linux's: elsewhere a confined spawn
// is refused, never run unconfined.
func startLocked(cmd *exec.Cmd, confine func() error, _ *v1join) (func() error, error) {
	if confine != nil {
		return nil, &confineError{errors.New("confining a command is not supported on this system")}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Wait, nil
}
