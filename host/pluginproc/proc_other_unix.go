//go:build unix && !linux

package pluginproc

import "syscall"

// sysProcAttr gives the plugin its own process group, which keeps a
// terminal's Ctrl-C away from plugins (the host tears them down in order).
// There is no parent-death signal here: the SDK's watch of the host ends an
// orphaned plugin.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
