package procs

import (
	"errors"
	"fmt"
	"syscall"
)

// errNoTrees is why Spawn fails on Windows: a command whose tree cannot be
// killed as a whole would break the timeout and abort guarantees. The
// Windows tree goes here: each command in a Job Object of its own (held in
// procTree, assigned at start), signalTree and killTree as
// TerminateJobObject, and JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE so a killed
// host takes its commands along (what the Linux watchdog does).
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
