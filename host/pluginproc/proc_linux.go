package pluginproc

import "syscall"

// sysProcAttr gives the plugin its own process group, which keeps a
// terminal's Ctrl-C away from plugins (the host tears them down in order),
// and a parent-death signal that kills it if the host dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
