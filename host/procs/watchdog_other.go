//go:build !linux && !windows

package procs

import (
	"errors"
	"fmt"
)

// StartWatchdog does nothing here: the watchdog kills cgroups, which only
// Linux has.
func (m *Manager) StartWatchdog(exe string) error { return nil }

// WatchdogPid is the current watchdog's pid: none runs here.
func (m *Manager) WatchdogPid() int { return 0 }

// RunWatchdog fails: there is no cgroup to guard on this system.
func RunWatchdog(dir string) error {
	return fmt.Errorf("watchdog: not supported on this system (it needs Linux cgroups): %w", errors.ErrUnsupported)
}
