package pluginproc

import (
	"os"
	"syscall"
)

// sysProcAttr gives the plugin its own console process group, which keeps a
// console's Ctrl-C away from plugins (the host tears them down in order).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// killGroup ends the plugin process only: Windows has no group kill. The
// plugin's tree, and its death with the host, will come from a Job Object
// the plugin is assigned to at start (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
// then TerminateJobObject here).
func killGroup(pid int) {
	if proc, err := os.FindProcess(pid); err == nil {
		_ = proc.Kill()
	}
}
