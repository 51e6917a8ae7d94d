package procs

import (
	"slices"
	"syscall"
)

// The Windows process tree, its decisions: what each command's Job Object
// is set to, how commands are created, how a tree is stopped and how the
// exit of a stopped tree's main process reads. They are plain Go so that
// every system tests them; tree_windows.go and terminal_windows.go act on
// them (tree_windows.go checks the constants against x/sys/windows).

// Job Object limit flags (JOBOBJECT_BASIC_LIMIT_INFORMATION.LimitFlags).
const (
	jobLimitDieOnUnhandledException = 0x00000400
	jobLimitKillOnJobClose          = 0x00002000
)

// jobLimits is what each command's Job Object is set to. Its processes die
// when the last handle to the job is closed: the host holds the only one,
// so a host that dies, however, takes its commands along (the Linux
// watchdog's part). A process that crashes ends at once instead of waiting
// on an error-report dialog nobody sees. No breakaway flag: a child cannot
// leave the tree.
const jobLimits = jobLimitKillOnJobClose | jobLimitDieOnUnhandledException

// Process creation flags (CreateProcess's dwCreationFlags).
const (
	createSuspended            = 0x00000004
	createNewProcessGroup      = 0x00000200
	createUnicodeEnvironment   = 0x00000400
	extendedStartupInfoPresent = 0x00080000
	createNoWindow             = 0x08000000
)

// commandCreation is how a command (not a terminal) is created. It starts
// suspended, so it is in its Job Object before it runs any code (a child
// started before the assignment would be outside the tree), and leads a
// process group of its own, which Ctrl-Break reaches without reaching the
// host. A host without a console gives each command a console of its own
// without a window (else each would open one on the desktop); Ctrl-Break
// cannot reach such a command, so its stop is the job's termination.
func commandCreation(hostConsole bool) uint32 {
	f := uint32(createSuspended | createNewProcessGroup)
	if !hostConsole {
		f |= createNoWindow
	}
	return f
}

// terminalCreation is how a terminal's command is created: suspended until
// it is in its Job Object, on the pseudo-console the attribute list names,
// with a Unicode environment block. It stays in the console's process
// group: a new group would make it ignore the Ctrl-C typed to it.
const terminalCreation = createSuspended | createUnicodeEnvironment | extendedStartupInfoPresent

// stopStep is one step in stopping a tree on Windows.
type stopStep int

const (
	// stepBreak sends CTRL_BREAK_EVENT to the command's process group:
	// a console program's Ctrl-Break handler runs, or it ends.
	stepBreak stopStep = iota + 1
	// stepCloseConsole closes a terminal's pseudo-console: its programs
	// get CTRL_CLOSE_EVENT (a hangup), and its output ends.
	stepCloseConsole
	// stepGrace waits for the grace, or for the main process to exit
	// (Process.terminate does, between signalTree and killTree).
	stepGrace
	// stepTerminate is TerminateJobObject: every process of the tree, at
	// once.
	stepTerminate
	// stepDrain waits, bounded, until the job has no active process.
	stepDrain
)

var stepNames = map[stopStep]string{
	stepBreak: "ctrl-break", stepCloseConsole: "close console", stepGrace: "grace",
	stepTerminate: "terminate job", stepDrain: "drain job",
}

func (s stopStep) String() string { return stepNames[s] }

// stopPlan is how a tree is stopped, in order. graceful is a stop with a
// grace (SIGTERM, then SIGKILL), not a kill; terminal says the tree runs
// on a pseudo-console; hostConsole, whether the host shares its console
// with its commands (Ctrl-Break reaches only processes on the sender's
// console). A tree nothing can ask to stop is terminated at once: a grace
// nobody is told about would only delay the end. A terminal's console is
// closed last on a kill, so its output ends once the tree is gone.
func stopPlan(graceful, terminal, hostConsole bool) []stopStep {
	kill := []stopStep{stepTerminate, stepDrain}
	switch {
	case graceful && terminal:
		return []stopStep{stepCloseConsole, stepGrace, stepTerminate, stepDrain}
	case graceful && hostConsole:
		return []stopStep{stepBreak, stepGrace, stepTerminate, stepDrain}
	case terminal:
		return append(kill, stepCloseConsole)
	}
	return kill
}

// beforeGrace is what signalTree does of a plan: the steps before the
// grace, or all of them when the plan has none (the tree is killed now).
func beforeGrace(plan []stopStep) []stopStep {
	if i := slices.Index(plan, stepGrace); i >= 0 {
		return plan[:i]
	}
	return plan
}

// stopSignal says what a signal sent to a tree does on Windows, which has
// no signals: a polite stop (the steps before the grace), a kill, or
// nothing (a signal Windows cannot deliver is dropped, as one sent to a
// tree that is gone).
func stopSignal(sig syscall.Signal) (polite, kill bool) {
	switch sig {
	case syscall.SIGKILL:
		return false, true
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT:
		return true, false
	}
	return false, false
}

// Exit codes of a stopped tree's processes.
const (
	// jobKilledExitCode is what TerminateJobObject gives every process
	// of the tree: 128+9, as a shell reports a process SIGKILL ended.
	jobKilledExitCode = 137
	// statusControlCExit (STATUS_CONTROL_C_EXIT) is how a console program
	// ends on a Ctrl-Break, Ctrl-C or console close it does not handle.
	statusControlCExit = 0xC000013A
)

// stoppedBy reads the main process's exit code against what the host did
// to its tree: asked it politely to stop with sent (0 if not), terminated
// its job (terminated). An exit code is only a number on Windows: it says
// "killed" only when the host did what gives that code, and then names
// the signal the host stood for, as a Unix wait status would.
func stoppedBy(code uint32, sent syscall.Signal, terminated bool) (syscall.Signal, bool) {
	switch {
	case terminated && code == jobKilledExitCode:
		return syscall.SIGKILL, true
	case sent != 0 && code == statusControlCExit:
		return sent, true
	}
	return 0, false
}
