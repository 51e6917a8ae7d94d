//go:build !linux

package watchdog

import "errors"

// Run fails: there is no cgroup to guard on this system.
func Run(dir string) error {
	return errors.New("watchdog: not supported on this system (it needs Linux cgroups): " + errors.ErrUnsupported.Error())
}
