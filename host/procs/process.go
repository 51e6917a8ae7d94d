package procs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/internal/notify"
)

// Status of a process.
type Status string

const (
	Running   Status = "running"
	Completed Status = "completed" // the main process exited by itself
	Killed    Status = "killed"    // killed by a signal (ours or another's)
)

// Process is one command and its tree.
type Process struct {
	ID  string
	Pid int

	m    *Manager
	spec Spec
	cmd  *exec.Cmd

	procTree // how the OS tracks the command's tree (tree_*.go)

	stdout, stderr *stream
	exited         chan struct{} // main process reaped
	done           chan struct{} // tree gone, output drained
	killOnce       sync.Once
	causeOnce      sync.Once
	unwatch        []func() bool // stop the timeout's timer and the abort's hook
	afterDone      []*func()     // AfterDone's callbacks not yet run; under mu
	changed        notify.Set    // output came (Follow)

	mu       sync.Mutex
	status   Status
	exitCode int
	signal   string
	timedOut bool
	aborted  bool
	limits   []*subprocess.LimitHit // the limits that stopped something in the tree
	started  time.Time
	ended    time.Time
}

func newProcess(m *Manager, id string, spec Spec) *Process {
	p := &Process{
		ID:     id,
		m:      m,
		spec:   spec,
		exited: make(chan struct{}),
		done:   make(chan struct{}),
		status: Running,
	}
	p.stdout = newStream(m, spec, id, "stdout", &p.changed)
	p.stderr = newStream(m, spec, id, "stderr", &p.changed)
	return p
}

// start starts the process and returns its wait (reap, end the tree, drain
// the output), which the caller runs: on a goroutine of its own, or on its
// own goroutine when it only waits for the end anyway. Once it returns,
// the caller gives the tree back (releaseTree).
func (p *Process) start(path string, env []string) (wait func(), err error) {
	cmd := exec.Command(path, p.spec.Argv[1:]...)
	cmd.Args = p.spec.Argv
	cmd.Dir = p.spec.Dir
	cmd.Env = env
	attr, err := p.sysProcAttr()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = attr

	outR, outW, err := os.Pipe()
	if err != nil {
		p.releaseTree()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		p.releaseTree()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var stdinW *os.File
	if p.spec.Stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			p.releaseTree()
			return nil, err
		}
		cmd.Stdin, stdinW = r, w
		defer r.Close()
	}
	scriptW, err := p.scriptPipe(cmd)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		p.releaseTree()
		return nil, err
	}
	waitFn, err := p.startTree(cmd)
	// The child has its copies; ours must go so EOF comes when it exits.
	outW.Close()
	errW.Close()
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		if scriptW != nil {
			scriptW.Close()
		}
		p.releaseTree()
		return nil, err
	}
	// Only Start reads the environment, built or asked for: a live job
	// need not hold either.
	cmd.Env, p.spec.Env = nil, nil
	p.cmd = cmd
	p.Pid = cmd.Process.Pid
	p.started = time.Now()
	if stdinW != nil {
		go func() {
			_, _ = stdinW.Write(p.spec.Stdin)
			stdinW.Close()
		}()
	}
	if scriptW != nil {
		script := p.spec.Script
		p.spec.Script = nil // a live job need not hold it
		go func() {
			_, _ = scriptW.Write(script)
			scriptW.Close()
		}()
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go p.stdout.pump(outR, &readers)
	go p.stderr.pump(errR, &readers)
	p.watch()
	return func() {
		p.wait(&readers, outR, errR, waitFn)
		if scriptW != nil {
			// A command that never read its script: the writer stops
			// when the tree is gone, not when the host is.
			scriptW.Close()
		}
	}, nil
}

// scriptPipe gives cmd the spec's script on ScriptFD, if it has one, and
// returns the end to write it to.
func (p *Process) scriptPipe(cmd *exec.Cmd) (*os.File, error) {
	if len(p.spec.Script) == 0 {
		return nil, nil
	}
	if onWindows {
		return nil, errNoScript
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{r} // the first extra file is descriptor 3
	return w, nil
}

// wait reaps the main process (with waitFn, which is cmd.Wait or its
// confined thread's), then ends the rest of its tree and drains the
// output.
func (p *Process) wait(readers *sync.WaitGroup, outR, errR *os.File, waitFn func() error) {
	err := waitFn()
	p.mu.Lock()
	p.ended = time.Now()
	p.exitCode, p.signal = 0, ""
	var ee *exec.ExitError
	switch {
	case err == nil:
		p.status = Completed
	case errors.As(err, &ee):
		if sig, ok := p.exitSignal(ee); ok {
			p.status, p.exitCode, p.signal = Killed, -1, SignalName(sig)
		} else {
			p.status, p.exitCode = Completed, ee.ExitCode()
		}
	default:
		p.status, p.exitCode = Killed, -1
	}
	sigkilled := p.signal == "SIGKILL"
	unwatch := p.unwatch
	p.mu.Unlock()
	close(p.exited)
	for _, stop := range unwatch {
		stop()
	}
	if sigkilled {
		p.treeSigkilled()
	}

	// What the main process left behind dies with it.
	p.killTree()
	if hits := p.limitHits(); hits != nil {
		p.mu.Lock()
		p.limits = hits
		p.mu.Unlock()
	}
	// A holder that escaped the tree (no cgroup) would keep the pipes open:
	// after 2 s, stop reading. A timer, not a goroutine and a select: this
	// runs at the end of every command.
	stopReading := time.AfterFunc(2*time.Second, func() {
		outR.Close()
		errR.Close()
	})
	readers.Wait()
	stopReading.Stop()
	p.stdout.finish()
	p.stderr.finish()
	close(p.done)
	p.runAfterDone()
}

// watch arms the fused deadline: the timeout, the caller's abort and an
// explicit kill; whichever comes first is the cause. They are callbacks, not
// a goroutine waiting on them, so a live process costs none.
func (p *Process) watch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spec.Timeout > 0 {
		p.unwatch = append(p.unwatch, time.AfterFunc(p.spec.Timeout, func() { p.cause(&p.timedOut) }).Stop)
	}
	if p.spec.Abort != nil {
		p.unwatch = append(p.unwatch, context.AfterFunc(p.spec.Abort, func() { p.cause(&p.aborted) }))
	}
}

// cause ends the tree for the first cause (flag names it; nil is a kill)
// unless the main process has exited already.
func (p *Process) cause(flag *bool) {
	p.causeOnce.Do(func() {
		if p.finished() {
			return
		}
		if flag != nil {
			p.mu.Lock()
			*flag = true
			p.mu.Unlock()
		}
		go p.terminate()
	})
}

// terminate sends SIGTERM to the tree, then SIGKILL after the grace.
func (p *Process) terminate() {
	p.signalTree(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(p.spec.Grace):
	}
	p.killTree()
}

// kill asks for the tree to be terminated; hard skips the grace.
func (p *Process) kill(hard bool) bool {
	if p.finished() {
		return false
	}
	p.killOnce.Do(func() {
		if hard {
			go p.killTree()
		}
		p.cause(nil)
	})
	return true
}

// Kill terminates the tree (SIGTERM, then SIGKILL after the grace). It
// returns false once the process has finished.
func (p *Process) Kill() bool { return p.kill(false) }

func (p *Process) finished() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Done is closed when the process has ended, its tree is gone and its
// output is collected.
func (p *Process) Done() <-chan struct{} { return p.done }

// AfterDone runs f in a goroutine of its own once the process is done (at
// once when it is), so that a waiter holds no goroutine while the process
// runs. stop keeps f from running, and reports whether it did.
func (p *Process) AfterDone(f func()) (stop func() bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		go f()
		return func() bool { return false }
	default:
	}
	h := &f
	p.afterDone = append(p.afterDone, h)
	return func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		i := slices.Index(p.afterDone, h)
		if i < 0 {
			return false
		}
		p.afterDone = slices.Delete(p.afterDone, i, i+1)
		return true
	}
}

// runAfterDone runs the callbacks AfterDone queued; done is closed, so
// none is queued after.
func (p *Process) runAfterDone() {
	p.mu.Lock()
	fs := p.afterDone
	p.afterDone = nil
	p.mu.Unlock()
	for _, f := range fs {
		go (*f)()
	}
}

// Owner is who the process belongs to.
func (p *Process) Owner() string { return p.spec.Owner }

// State reports the status, and once finished the exit code and signal,
// without touching the output.
func (p *Process) State() (Status, int, string) {
	select {
	case <-p.done:
	default:
		return Running, 0, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.exitCode, p.signal
}

// Result is how a process ended and what it printed.
type Result struct {
	Status Status
	// ExitCode is the exit status; -1 when killed by a signal.
	ExitCode int
	// Signal names the signal that killed the main process ("SIGKILL").
	Signal string
	// TimedOut and Aborted say which first cause ended the process; at
	// most one is true.
	TimedOut, Aborted bool
	// Limits are the limits of the tree that stopped something in it: a
	// fork that failed, a process killed for memory.
	Limits         []*subprocess.LimitHit
	Duration       time.Duration
	Stdout, Stderr Collected
}

// Result returns the outcome; call it after Done. The collected output is
// what no Read has consumed yet; Result itself consumes nothing.
func (p *Process) Result() Result {
	p.mu.Lock()
	r := Result{
		Status:   p.status,
		ExitCode: p.exitCode,
		Signal:   p.signal,
		TimedOut: p.timedOut,
		Aborted:  p.aborted,
		Limits:   p.limits,
		Duration: p.ended.Sub(p.started),
	}
	p.mu.Unlock()
	r.Stdout = p.stdout.collect(false)
	r.Stderr = p.stderr.collect(false)
	return r
}

// Read is one consuming read of both streams.
type Read struct {
	Stdout, Stderr Collected
	// Lossy is true when bytes produced since the previous read were
	// dropped; the spill files hold them.
	Lossy  bool
	Status Status
	// ExitCode and Signal are set once the process has finished, and
	// Limits, the limits that stopped something in its tree.
	ExitCode int
	Signal   string
	Limits   []*subprocess.LimitHit
}

// Read returns the output produced since the previous Read (never twice).
func (p *Process) Read() Read {
	// Finished first, then the output: a read that reports the end has
	// everything the process wrote.
	finished := false
	select {
	case <-p.done:
		finished = true
	default:
	}
	r := Read{Stdout: p.stdout.collect(true), Stderr: p.stderr.collect(true)}
	r.Lossy = r.Stdout.Truncated || r.Stderr.Truncated
	r.Status = Running
	if finished {
		p.mu.Lock()
		r.Status, r.ExitCode, r.Signal, r.Limits = p.status, p.exitCode, p.signal, p.limits
		p.mu.Unlock()
	}
	return r
}

// startedAt is when it started (set before the Manager lists it).
func (p *Process) startedAt() time.Time { return p.started }

// Workdir is the working directory it was started in.
func (p *Process) Workdir() string { return p.spec.Dir }

// Written counts the bytes it printed so far, both streams, read or not.
func (p *Process) Written() int64 { return p.stdout.written() + p.stderr.written() }
