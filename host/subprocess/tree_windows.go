package subprocess

import (
	"errors"
	"fmt"
	"syscall"
)

// errNoTrees is why Spawn fails on Windows: a command whose tree cannot be
// killed as a whole would break the timeout and abort guarantees. A Job
// Object goes here: created in openTrees' place per command, the process
// started suspended and assigned to it in sysProcAttr, killTree as
// TerminateJobObject, and JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE for a killed
// host (the part the Linux watchdog does).
var errNoTrees = fmt.Errorf("running commands is not supported on windows yet (no process-tree kill): %w", errors.ErrUnsupported)

type (
	trees    struct{}
	procTree struct{}
)

func (m *Manager) openTrees()  {}
func (m *Manager) closeTrees() {}

// Cgroups reports whether whole trees are tracked with cgroups: never here.
func (m *Manager) Cgroups() bool { return false }

func (p *Process) sysProcAttr() (*syscall.SysProcAttr, error) { return nil, errNoTrees }

// Nothing is ever started, so there is no tree to signal or release.
func (p *Process) releaseTree()                  {}
func (p *Process) treeSigkilled()                {}
func (p *Process) signalTree(sig syscall.Signal) {}
func (p *Process) killTree()                     {}

// signalName leaves Windows' exit statuses to the generic "SIG<n>" form.
func signalName(syscall.Signal) string { return "" }
