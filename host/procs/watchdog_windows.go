package procs

import (
	"errors"
	"fmt"
)

// No watchdog runs on Windows: each command's Job Object kills its tree
// when its last handle is closed (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE), and
// the host holds the only handle, so when the host dies, however, the
// system closes it and kills the trees: the watchdog's part, done by the
// kernel.

// StartWatchdog does nothing: the jobs guard the trees (see above).
func (m *Manager) StartWatchdog(exe string) error { return nil }

// WatchdogPid is the current watchdog's pid: none runs here.
func (m *Manager) WatchdogPid() int { return 0 }

// RunWatchdog fails: on Windows the jobs guard the trees themselves.
func RunWatchdog(dir string) error {
	return fmt.Errorf("watchdog: not needed on windows (each command's job object ends its tree when the host dies): %w", errors.ErrUnsupported)
}
