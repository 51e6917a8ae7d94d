// Package shell is the service definition of ctx.shell, the shell executor
// seam. It owns the contract every executor serves (the dsh.shell.v1.Shell
// gRPC service: resolve, run, start, and the process operations), its
// vocabulary, the sandboxMode capability fact, the shared settings
// namespace, the exit-marker contract (ParseExitStatus), and the Go client
// consumers use. It starts no process: executors do that through
// ctx.subprocess, and the model-facing tools own all rendering.
//
// The rules of the seam:
//   - Resolve applies every default and cap; Run and Start never re-default.
//     Limits says which, as facts: callers read them there, never from the
//     executor's config (which only the executor parses).
//   - Resolve carries the caller's trusted DSH_* layer (dsh_env) into the
//     spec unchanged: nobody applies it again.
//   - Run fails only for infrastructure failures (an unusable working
//     directory, a missing shell, a call already cancelled). A non-zero
//     exit, a timeout kill or an abort kill is a RunResult, with TimedOut
//     and Aborted telling the first cause (never both).
//   - Start returns a handle at once, with no timeout; waiting on it never
//     fails for the process's own outcome (a spawn failure settles as
//     killed, with the error on stderr); Kill returns false once finished.
//   - ReadOutput consumes: consecutive reads never repeat output, and a
//     read that lost bytes is Lossy and names the spill files.
//   - Processes belong to ctx.subprocess, not to the executor: handles
//     survive an executor reload.
//   - ctx.jobs reaches a background process only through ReadOutput, Kill
//     and Wait, on whichever provider holds the key then: the executor is
//     the one consuming reader, so what it adds to a read or a state (a
//     sandbox's denials) is what the agent gets. ctx.jobs asks Wait once
//     the host has seen the process end, so it answers at once; one that
//     fails while the executor reloads is asked again of the new provider.
package shell

import (
	"github.com/dshrun/dsh/core/output/outputv1"
	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
)

// Key is the service key: ctx.shell.
const Key = "shell"

// ServiceName is the gRPC service every executor serves under Key.
var ServiceName = shellv1.Shell_ServiceDesc.ServiceName

// SettingsNamespace names the composition settings section every executor
// reads, so one settings document serves bash-local on POSIX and pwsh-local
// on Windows.
const SettingsNamespace = "shell"

// FactSandboxMode is the capability fact a sandboxing executor reports for
// Key: its default sandbox mode. Absent means the executor does not
// sandbox.
const FactSandboxMode = "sandboxMode"

// SandboxMode is one of the three sandbox modes.
type SandboxMode string

const (
	ReadOnly         SandboxMode = "read-only"
	WorkspaceWrite   SandboxMode = "workspace-write"
	DangerFullAccess SandboxMode = "danger-full-access"
)

// The vocabulary is the wire's: these names are what the seam calls them.
type (
	// ExecRequest is what a caller asks for; every field is optional but
	// the command.
	ExecRequest = shellv1.ExecRequest
	// ExecSpec is a fully resolved request.
	ExecSpec = shellv1.ExecSpec
	// RunResult is how a foreground command ended and what it printed.
	RunResult = shellv1.RunResult
	// Collected is one stream's output and what became of the rest of it.
	Collected = outputv1.Collected
	// ProcessRead is one consuming read of a background process.
	ProcessRead = shellv1.ProcessRead
	// ProcessState is a background process's status.
	ProcessState = shellv1.ProcessState
	// SandboxInfo holds the sandbox facts of a run.
	SandboxInfo = outputv1.SandboxInfo
	// SandboxPolicy is a per-call sandbox policy.
	SandboxPolicy = shellv1.SandboxPolicy
	// LimitHit is a limit of a command's tree that stopped something in
	// it.
	LimitHit = outputv1.LimitHit
	// Limits are an executor's defaults and caps (Executor.Limits).
	Limits = shellv1.ExecLimits
)

// The timeouts of ctx.shell: an executor's when its config names none.
const (
	DefaultTimeoutMs    = 120_000
	DefaultMaxTimeoutMs = 600_000
)

// DefaultLimits are the limits of an executor whose config sets none:
// ctx.shell's timeouts, and ctx.subprocess's grace and output bounds. A
// caller assumes them of an executor that does not say its own; they
// name no working directory.
func DefaultLimits() *Limits {
	return &Limits{
		TimeoutMs:      DefaultTimeoutMs,
		MaxTimeoutMs:   DefaultMaxTimeoutMs,
		GraceMs:        subprocess.DefaultGraceMs,
		MaxOutputBytes: subprocess.DefaultMaxOutputBytes,
		MaxSpillBytes:  subprocess.DefaultMaxSpillBytes,
	}
}

// The limits of LimitHit.Limit.
const (
	// LimitProcesses: a fork failed at the cap on tasks (processes and
	// threads alive at once).
	LimitProcesses = "processes"
	// LimitMemory: a process was killed on reaching the memory limit.
	LimitMemory = "memory"
)

// Process status values of ProcessState.Status.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusKilled    = "killed"
)
