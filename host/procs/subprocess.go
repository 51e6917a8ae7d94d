// Package procs is ctx.subprocess, the host's process primitive. It
// owns every OS process a tool starts: the explicit environment (the
// credential scrub, then the caller's layer), a new session and process
// group without a controlling terminal, stdin closed unless given, a
// parent-death signal, one cgroup per command so the whole tree dies
// together (setsid and double-forked children included), the fused deadline
// (timeout and caller abort, first cause wins), SIGTERM then SIGKILL after a
// grace, and the collected output: a bounded in-memory tail per stream,
// consuming reads that say when they lost bytes, spill files that hold
// the full output up to a cap, and a follow of the output from its start
// that consumes nothing (follow.go).
//
// A process's tree lives as long as its main process: when the main process
// exits, whatever it left behind is killed, so no command can hold its
// caller hostage through an inherited pipe.
//
// It does not know shells, tools or agents: argv in, facts out.
//
// How trees are held is OS-specific (tree_*.go, watchdog_linux.go,
// pipe_linux.go). All of the above is Linux. On other Unix systems (macOS)
// a tree is its session's process group, which setsid and double-forked
// children escape; there is no parent-death signal and no watchdog, so a
// SIGKILLed host leaves its commands running. On Windows a tree is a Job
// Object of its own, which the command joins before it runs and which
// ends with the host's handle to it; a stop is Ctrl-Break to the
// command's process group, then the job's termination after the grace
// (tree_windows.go, winjob.go); there is no script descriptor, and no
// limits.
package procs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/host/credential"
)

// Defaults for zero Spec fields: ctx.subprocess's.
const (
	DefaultGrace          = subprocess.DefaultGraceMs * time.Millisecond
	DefaultMaxOutputBytes = subprocess.DefaultMaxOutputBytes
	DefaultMaxSpillBytes  = subprocess.DefaultMaxSpillBytes
	// DefaultMaxSpillTotal caps the disk used by all spill files together.
	DefaultMaxSpillTotal = 1 << 30
	// DefaultSpillOwnerShare is the part of MaxSpillTotal one owner may
	// use when MaxSpillPerOwner is 0: a quarter (256 MiB of the default
	// 1 GiB, four streams at the default 64 MiB cap), so one session's
	// floods leave three quarters for the others.
	DefaultSpillOwnerShare = 4
)

// ScriptFD is the descriptor a command reads Spec.Script on.
const ScriptFD = 3

// EnvPrefix is the managed namespace: ambient DSH_* variables are scrubbed;
// only an explicit layer (the trusted snapshot) may set them.
const EnvPrefix = "DSH_"

// Config configures a Manager.
type Config struct {
	// SpillDir holds spill files, one folder per owner; it is created 0700.
	SpillDir string
	// MaxSpillTotal caps all spill files together; 0 means 1 GiB.
	MaxSpillTotal int64
	// MaxSpillPerOwner caps the spill files of one owner together, so one
	// owner cannot starve the others; 0 means a quarter of MaxSpillTotal
	// (DefaultSpillOwnerShare).
	MaxSpillPerOwner int64
	// Environ is the ambient environment, read once by New; nil means
	// os.Environ.
	Environ func() []string
	// Scrub withholds credentials from the ambient environment; nil means
	// the built-in rule.
	Scrub  *credential.Rule
	Logger hclog.Logger
	// KeepSpill leaves the spill files in place at Close (for one-shot
	// callers that print their paths).
	KeepSpill bool
	// NoCgroup disables per-command cgroups (then a tree is found by its
	// process group only, which misses setsid children, and nothing is
	// limited).
	NoCgroup bool
	// Limits are the limits of a command whose Spec asks for none: a zero
	// field means the built-in default (DefaultMaxProcesses tasks, half
	// the memory the host may use), a negative one no limit.
	Limits Limits
}

// Spec says what to run.
type Spec struct {
	Argv []string
	// Dir is the working directory; it must exist.
	Dir string
	// Env is the explicit layer over the scrubbed ambient environment.
	Env map[string]string
	// Stdin, if non-nil, is written to the command's stdin, which is then
	// closed. nil means stdin is the null device.
	Stdin []byte
	// Script, if not empty, is what the command reads on descriptor 3
	// (ScriptFD), a pipe closed at its end: a way to give a program more
	// than one argument may hold. Not on Windows, where a spawn with a
	// script fails.
	Script []byte
	// Owner is who the process belongs to (an agent or a plugin id); its
	// processes die and its spill files go when ReleaseOwner is called.
	Owner string
	// Timeout kills the tree after this long; 0 means no timeout.
	Timeout time.Duration
	// Abort, when done, kills the tree (unless a timeout came first).
	Abort context.Context
	// Grace is the time between SIGTERM and SIGKILL; 0 means 3s.
	Grace time.Duration
	// MaxOutputBytes bounds each stream's unread output in memory; 0 means
	// 64000. Older unread bytes are dropped (the next read is lossy).
	MaxOutputBytes int
	// MaxSpillBytes caps each stream's spill file; 0 means 64 MiB.
	MaxSpillBytes int64
	// SpillAfterBytes starts a stream's spill file once it holds more than
	// this, within MaxOutputBytes too; 0 means MaxOutputBytes.
	SpillAfterBytes int
	// Call is the host-stamped call the process serves, if any
	// (LatestLine finds it by that).
	Call string
	// Detached: started to outlive the request that started it (a
	// background process), not waited on by it.
	Detached bool
	// Confine, if set, restricts the calling OS thread (a sandbox
	// runner's confinement): the command is forked from a thread that
	// ran it, and waited on there, and that thread is never used again.
	// An error means nothing was started.
	Confine func() error
	// Limits bound the tree's tasks and memory; a zero field means the
	// manager's default, a negative one no limit.
	Limits Limits
}

// Error is an infrastructure failure: the command could not be started.
type Error struct {
	Op   string // "workdir", "lookup", "start", "closed"
	Argv []string
	Dir  string // the working directory, for "workdir"
	Err  error
}

// Error says what could not be started in a plain sentence that names the
// thing (the working directory, the program): it reaches the model as is.
func (e *Error) Error() string {
	name := ""
	if len(e.Argv) > 0 {
		name = e.Argv[0]
	}
	switch e.Op {
	case "workdir":
		switch {
		case errors.Is(e.Err, fs.ErrNotExist):
			return fmt.Sprintf("workdir %s does not exist", e.Dir)
		case errors.Is(e.Err, fs.ErrPermission):
			return fmt.Sprintf("workdir %s cannot be entered (permission denied)", e.Dir)
		case errors.Is(e.Err, errNotDir):
			return fmt.Sprintf("workdir %s is not a directory", e.Dir)
		}
		return fmt.Sprintf("workdir %s cannot be used: %v", e.Dir, errText(e.Err))
	case "lookup":
		if errors.Is(e.Err, exec.ErrNotFound) {
			return fmt.Sprintf("%s is not installed (not found on PATH)", name)
		}
		return fmt.Sprintf("%s cannot be run: %v", name, errText(e.Err))
	case "closed":
		return "the host is shutting down; nothing was started"
	}
	if errors.Is(e.Err, ErrConfine) {
		return fmt.Sprintf("%s was not started: %v", name, e.Err)
	}
	if name == "" {
		return fmt.Sprintf("nothing to start: %v", e.Err)
	}
	return fmt.Sprintf("%s could not be started: %v", name, errText(e.Err))
}

var errNotDir = errors.New("not a directory")

// ErrConfine is a spawn the sandbox could not confine: nothing ran.
var ErrConfine = errors.New("the sandbox could not confine the command")

// confineError is a Confine that failed on the forking thread.
type confineError struct{ err error }

func (e *confineError) Error() string {
	return "the sandbox could not confine the command: " + e.err.Error()
}
func (e *confineError) Unwrap() error        { return e.err }
func (e *confineError) Is(target error) bool { return target == ErrConfine }

func (e *Error) Unwrap() error { return e.Err }

// Manager owns processes. Safe for concurrent use.
type Manager struct {
	cfg    Config
	log    hclog.Logger
	trees  // how the OS tracks process trees (tree_*.go)
	nextID atomic.Uint64
	spill  spillBudget
	// limits says how trees are limited (set by openTrees).
	limits LimitsStatus
	// bigPipes counts the pipes grown for streams pouring output.
	bigPipes atomic.Int32
	peeks    atomic.Int64 // LatestLine calls

	// ambient is the host's environment, scrubbed once: without
	// credentials and without DSH_*; ambientEnv is it as KEY=value,
	// sorted by key.
	ambient    map[string]string
	ambientEnv []string

	// found caches lookPath (see program), keyed by PATH and name.
	foundMu sync.Mutex
	found   map[string]string

	mu     sync.Mutex
	procs  map[string]*Process
	terms  map[string]*Terminal // the terminals among procs (terminal.go)
	closed bool
	// ended are the calls KillDetached ended, and when: a detached
	// process still on its way for one of them is killed as it is
	// entered (stop.go).
	ended map[string]time.Time
}

// New makes a Manager. On Linux, per-command cgroups are used where the
// cgroup v2 hierarchy is writable; elsewhere it falls back to process groups
// and says so in the log.
func New(cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ
	}
	if cfg.MaxSpillTotal <= 0 {
		cfg.MaxSpillTotal = DefaultMaxSpillTotal
	}
	if cfg.MaxSpillPerOwner <= 0 {
		cfg.MaxSpillPerOwner = cfg.MaxSpillTotal / DefaultSpillOwnerShare
	}
	if cfg.SpillDir == "" {
		return nil, errors.New("subprocess: no spill directory")
	}
	if err := os.MkdirAll(cfg.SpillDir, 0o700); err != nil {
		return nil, fmt.Errorf("subprocess: spill directory: %w", err)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, procs: map[string]*Process{}, terms: map[string]*Terminal{}, ambient: map[string]string{}}
	for _, kv := range cfg.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if ok && !strings.HasPrefix(k, EnvPrefix) && !cfg.Scrub.Withholds(k, v) {
			m.ambient[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.ambient)) {
		m.ambientEnv = append(m.ambientEnv, k+"="+m.ambient[k])
	}
	m.spill.max, m.spill.perOwner = cfg.MaxSpillTotal, cfg.MaxSpillPerOwner
	m.limits = LimitsStatus{Reason: "limits need Linux cgroups"}
	m.openTrees()
	return m, nil
}

// Limits says how the limits of command trees are enforced, or why they
// are not.
func (m *Manager) Limits() LimitsStatus { return m.limits }

// Env builds a command's environment: the ambient one without credentials
// and without DSH_* (scrubbed once, in New), then the explicit layer.
func (m *Manager) Env(explicit map[string]string) []string {
	if onWindows {
		return foldEnv(m.ambientEnv, explicit)
	}
	out := make([]string, 0, len(m.ambientEnv)+len(explicit))
	keys := slices.Sorted(maps.Keys(explicit))
	// Both layers are sorted by key: merge them, the explicit one winning.
	i := 0
	for _, kv := range m.ambientEnv {
		k, _, _ := strings.Cut(kv, "=")
		for i < len(keys) && keys[i] < k {
			out = append(out, keys[i]+"="+explicit[keys[i]])
			i++
		}
		if i < len(keys) && keys[i] == k {
			continue // the explicit value comes next
		}
		out = append(out, kv)
	}
	for ; i < len(keys); i++ {
		out = append(out, keys[i]+"="+explicit[keys[i]])
	}
	return out
}

// admit checks what every spawn needs before anything starts (a usable
// working directory, the program on PATH, a manager still open) and gives
// the program's path, the environment and a new process id.
func (m *Manager) admit(argv []string, dir string, explicit map[string]string) (path string, env []string, id string, err error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = errNotDir
		}
		return "", nil, "", &Error{Op: "workdir", Argv: argv, Dir: dir, Err: err}
	}
	env = m.Env(explicit)
	if path, err = m.program(argv[0], env); err != nil {
		return "", nil, "", &Error{Op: "lookup", Argv: argv, Err: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", nil, "", &Error{Op: "closed", Argv: argv, Err: errors.New("the host is shutting down")}
	}
	return path, env, m.newID(), nil
}

// Spawn starts a process. It fails only when the command cannot be started
// (an unusable working directory, a missing program, a closed manager).
func (m *Manager) Spawn(spec Spec) (*Process, error) { return m.spawn(spec, false) }

func (m *Manager) spawn(spec Spec, inline bool) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, &Error{Op: "start", Err: errors.New("empty argv")}
	}
	if spec.Grace <= 0 {
		spec.Grace = DefaultGrace
	}
	if spec.MaxOutputBytes <= 0 {
		spec.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if spec.MaxSpillBytes <= 0 {
		spec.MaxSpillBytes = DefaultMaxSpillBytes
	}
	path, env, id, err := m.admit(spec.Argv, spec.Dir, spec.Env)
	if err != nil {
		return nil, err
	}
	p := newProcess(m, id, spec)
	wait, err := p.start(path, env)
	if err != nil {
		return nil, &Error{Op: "start", Argv: spec.Argv, Err: err}
	}
	m.mu.Lock()
	m.procs[id] = p
	late := spec.Detached && m.endedLocked(spec.Call)
	m.mu.Unlock()
	if late {
		p.kill(false)
	}
	// Once the tree is gone, letting go of what tracked it need not delay
	// anyone: not a caller of Done, nor a Run that waits here.
	if inline {
		wait()
		go p.releaseTree()
	} else {
		go func() {
			wait()
			p.releaseTree()
		}()
	}
	return p, nil
}

// Run is Spawn, then waits until the process is done on the calling
// goroutine, not on one of its own: a foreground command's end then wakes
// no goroutine but its caller's. It returns once Done is closed.
func (m *Manager) Run(spec Spec) (*Process, error) { return m.spawn(spec, true) }

// newID makes a process id. Ids are handles: the random part keeps a
// plugin from guessing another's.
func (m *Manager) newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "p" + strconv.FormatUint(m.nextID.Add(1), 10) + "-" + hex.EncodeToString(b[:])
}

// SpawnSettled is Spawn for callers that must get a handle whatever
// happens: a spawn failure yields a process already settled as killed,
// with the error on its stderr.
func (m *Manager) SpawnSettled(spec Spec) *Process {
	p, err := m.Spawn(spec)
	if err == nil {
		return p
	}
	return m.Settled(spec, err)
}

// Settled is a process of spec that never started because of err: settled
// as killed, with err on its stderr.
func (m *Manager) Settled(spec Spec, err error) *Process {
	if spec.MaxOutputBytes <= 0 {
		spec.MaxOutputBytes = DefaultMaxOutputBytes
	}
	m.mu.Lock()
	id := m.newID()
	p := newProcess(m, id, spec)
	p.status, p.exitCode = Killed, -1
	_, _ = p.stderr.Write([]byte(err.Error() + "\n"))
	close(p.exited)
	close(p.done)
	if !m.closed {
		m.procs[id] = p
	}
	m.mu.Unlock()
	return p
}

// Get returns a process by id; owner must match unless it is "".
func (m *Manager) Get(owner, id string) (*Process, error) {
	m.mu.Lock()
	p, ok := m.procs[id]
	m.mu.Unlock()
	// Another owner's process is answered as an unknown id, word for
	// word: a different answer would confirm that it exists.
	if !ok || owner != "" && p.spec.Owner != owner {
		return nil, fmt.Errorf("no process %q", id)
	}
	return p, nil
}

// Forget drops a finished process from the table (its spill files stay
// until its owner is released).
func (m *Manager) Forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.procs[id]; ok && p.finished() {
		delete(m.procs, id)
		delete(m.terms, id)
	}
}

// ReleaseOwner kills every process of owner, waits for them (bounded by
// ctx) and removes the owner's spill files.
func (m *Manager) ReleaseOwner(ctx context.Context, owner string) error {
	m.mu.Lock()
	var ps []*Process
	for id, p := range m.procs {
		if p.spec.Owner == owner {
			ps = append(ps, p)
			delete(m.procs, id)
			delete(m.terms, id)
		}
	}
	m.mu.Unlock()
	err := killAll(ctx, ps)
	m.spill.release(owner)
	return errors.Join(err, os.RemoveAll(m.ownerDir(owner)))
}

// Close kills every process, waits for them (bounded by ctx), and removes
// all spill files and cgroups. Spawn fails afterwards.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	ps := make([]*Process, 0, len(m.procs))
	for _, p := range m.procs {
		ps = append(ps, p)
	}
	m.procs = map[string]*Process{}
	m.terms = map[string]*Terminal{}
	m.mu.Unlock()
	err := killAll(ctx, ps)
	m.closeTrees()
	if m.cfg.KeepSpill {
		return err
	}
	return errors.Join(err, os.RemoveAll(m.cfg.SpillDir))
}

func killAll(ctx context.Context, ps []*Process) error {
	for _, p := range ps {
		p.kill(true)
	}
	var errs []error
	for _, p := range ps {
		select {
		case <-p.Done():
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("process %s (pid %d) still running: %w", p.ID, p.Pid, ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// OwnerSpillDir is the folder of owner's spill files (it may not exist
// yet).
func (m *Manager) OwnerSpillDir(owner string) string { return m.ownerDir(owner) }

func (m *Manager) ownerDir(owner string) string {
	return filepath.Join(m.cfg.SpillDir, SafeName(owner))
}

// OwnerDir is the folder holding owner's spill files.
func (m *Manager) OwnerDir(owner string) string { return m.ownerDir(owner) }

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// SafeName is owner as a file name: anything but letters, digits, '.',
// '_' and '-' becomes '_'.
func SafeName(s string) string {
	if s == "" {
		return "_"
	}
	return unsafeChars.ReplaceAllString(s, "_")
}

// lookPath finds a program on the PATH of the command's own environment
// (on Windows with each extension its PATHEXT lists).
func lookPath(name string, env []string) (string, error) {
	if hasDir(name) {
		return exec.LookPath(name)
	}
	path := pathOf(env)
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if onWindows {
			for _, n := range programNames(name, foldedValue(env, "PATHEXT")) {
				if p := filepath.Join(dir, n); executable(p) {
					return p, nil
				}
			}
			continue
		}
		if p := filepath.Join(dir, name); executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w on PATH %q", exec.ErrNotFound, path)
}

// executable reports whether p is a file anyone may execute (on Windows,
// a file: its name says whether it runs).
func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && (onWindows || fi.Mode()&0o111 != 0)
}

// pathOf is the PATH of an environment (the last one, as exec takes it;
// on Windows in any case, "Path" as often as not).
func pathOf(env []string) string {
	if onWindows {
		return foldedValue(env, "PATH")
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}

// program is lookPath with a cache, as bash hashes the commands it ran: a
// program found once on a PATH is taken again from where it was while it
// is still an executable file there (one stat, not one per directory on
// the way). The argv[0] of executors (bash, pwsh, a sandbox's runner) is
// looked up this way on every command; the commands a shell runs are
// looked up by the shell.
func (m *Manager) program(name string, env []string) (string, error) {
	if hasDir(name) {
		return lookPath(name, env)
	}
	key := pathOf(env) + "\x00" + name
	m.foundMu.Lock()
	p, ok := m.found[key]
	m.foundMu.Unlock()
	if ok && executable(p) {
		return p, nil
	}
	p, err := lookPath(name, env)
	m.foundMu.Lock()
	defer m.foundMu.Unlock()
	if err != nil {
		delete(m.found, key)
		return p, err
	}
	if m.found == nil || len(m.found) >= maxFound {
		m.found = map[string]string{} // callers that vary PATH start it over
	}
	m.found[key] = p
	return p, nil
}

// maxFound bounds the program cache.
const maxFound = 64

// SignalName is "SIGKILL" for syscall.SIGKILL.
func SignalName(sig syscall.Signal) string {
	if n := signalName(sig); n != "" {
		return n
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// LatestLine is the last line of output the newest running process of
// call holds (stdout's, else stderr's), raw: as it stands, without
// consuming it; "" when there is none. It costs nothing unless asked.
func (m *Manager) LatestLine(call string) []byte {
	if call == "" {
		return nil
	}
	m.peeks.Add(1)
	var newest *Process
	m.mu.Lock()
	for _, p := range m.procs {
		if p.spec.Call == call && !p.finished() && (newest == nil || p.startedAt().After(newest.startedAt())) {
			newest = p
		}
	}
	m.mu.Unlock()
	if newest == nil {
		return nil
	}
	if line := newest.stdout.lastLine(); len(line) > 0 {
		return line
	}
	return newest.stderr.lastLine()
}

// Peeks counts LatestLine calls, for tests that check a call without a
// progress token costs nothing.
func (m *Manager) Peeks() int64 { return m.peeks.Load() }

// SpawnerGoroutine is the function of the goroutines that fork commands
// for the life of the process (on Linux): for goleak.IgnoreTopFunction in
// tests that check for leaked goroutines.
const SpawnerGoroutine = "github.com/dshrun/dsh/host/procs.spawnLoop"
