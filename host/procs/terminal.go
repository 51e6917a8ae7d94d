package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Terminals: commands on a pseudo-terminal the host holds. A terminal's
// command is a Process like any other, in the same table: it leads a new
// session, its tree is held the same way (one cgroup), it is forked from a
// locked thread that lives as long as it does (the parent-death signal is
// that thread's), and it dies with its owner (ReleaseOwner), with the host
// (Close) and, like every tree, when its main process exits. What a
// terminal adds is its master side, which only the host holds: input,
// size, the foreground process group, and one bounded output.

// Defaults for zero TerminalSpec fields, and the bounds of a size.
const (
	DefaultTerminalCols   = 80
	DefaultTerminalRows   = 24
	DefaultTerminalBuffer = 256 << 10
	// MaxTerminalSide bounds columns and rows alike.
	MaxTerminalSide = 1000
	// maxTerminalWait bounds a read's wait for output.
	maxTerminalWait = 10 * time.Minute
)

// TerminalSpec says what to run on a terminal.
type TerminalSpec struct {
	Argv []string
	// Dir is the working directory; it must exist.
	Dir string
	// Env is the explicit layer over the scrubbed ambient environment.
	Env map[string]string
	// Owner is who the terminal belongs to (an agent or a plugin id).
	Owner string
	// Call is the host-stamped call it was spawned under, if any: a
	// caller whose call failed after the spawn finds what it left by it
	// (CloseUnclaimed).
	Call string
	// Cols and Rows are its size; 0 means 80 by 24.
	Cols, Rows int
	// MaxBufferBytes bounds the unread output kept; 0 means 256 KiB.
	// Older unread bytes are dropped and counted.
	MaxBufferBytes int
	// Confine, as Spec.Confine: the command is forked from a thread it
	// restricted.
	Confine func() error
}

// Terminal is a command on a pseudo-terminal. Safe for concurrent use.
type Terminal struct {
	p      *Process
	master *os.File
	// input is where typed input is written: the master itself, but a
	// pipe of its own on Windows.
	input *os.File
	slave string // the slave's path, for what waits in its input queue
	max   int

	// readMu is held by each read(2) of the master and by InFlight; held
	// counts what the last read took until it is added (pump).
	readMu sync.Mutex
	held   atomic.Int64

	// claimed is set once a holder (ctx.terminals) reads it alone.
	claimed atomic.Bool
	// writeMu keeps one write at a time, each with its own deadline.
	writeMu sync.Mutex
	// writer is the call the latest write was made under (writeMu).
	writer atomic.Pointer[string]
	// inMu orders a write's deadline with an interrupt's discard: a write
	// that was waiting for the terminal to take it when input was
	// discarded finds discards changed, and stops.
	inMu     sync.Mutex
	discards uint64

	// obsMu is held while output is added and handed to observers, so
	// an observer sees every byte exactly once, in order.
	obsMu     sync.Mutex
	observers []io.Writer

	mu      sync.Mutex
	buf     []byte        // unread output, at most max bytes
	dropped int64         // unread bytes dropped since the last read
	total   int64         // every byte printed
	eof     bool          // the master reads no more
	more    chan struct{} // closed (and replaced) when output comes or ends
	cols    int
	rows    int
}

// TerminalRead is one consuming read of a terminal.
type TerminalRead struct {
	// Data is what the terminal printed since the previous read, raw.
	Data []byte
	// Dropped counts bytes printed since the previous read that were
	// dropped unread (older than the buffer holds).
	Dropped int64
	// Total counts every byte the terminal printed.
	Total int64
	// Status, and once finished the exit code and the signal.
	Status   Status
	ExitCode int
	Signal   string
}

// SpawnTerminal starts a command on a new terminal. It fails only when the
// command cannot be started (an unusable working directory, a missing
// program, a size out of range, a confinement that failed, a closed
// manager, a system without terminals).
func (m *Manager) SpawnTerminal(spec TerminalSpec) (*Terminal, error) {
	if len(spec.Argv) == 0 {
		return nil, &Error{Op: "start", Err: errors.New("empty argv")}
	}
	cols, rows, err := terminalSize(spec.Cols, spec.Rows)
	if err != nil {
		return nil, &Error{Op: "start", Argv: spec.Argv, Err: err}
	}
	if spec.MaxBufferBytes <= 0 {
		spec.MaxBufferBytes = DefaultTerminalBuffer
	}
	path, env, id, err := m.admit(spec.Argv, spec.Dir, spec.Env)
	if err != nil {
		return nil, err
	}

	// The process's own streams stay empty: a terminal's output is its
	// master's, kept by the Terminal and never spilled to a file.
	p := newProcess(m, id, Spec{
		Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, Owner: spec.Owner, Call: spec.Call,
		Grace: DefaultGrace, MaxOutputBytes: 1, MaxSpillBytes: 1, Confine: spec.Confine,
	})
	t := &Terminal{p: p, max: spec.MaxBufferBytes, more: make(chan struct{}), cols: cols, rows: rows}
	if err := t.start(path, env); err != nil {
		return nil, &Error{Op: "start", Argv: spec.Argv, Err: err}
	}
	m.mu.Lock()
	if m.closed {
		// Close ran meanwhile and did not see it: it goes now.
		m.mu.Unlock()
		p.kill(true)
		<-p.Done()
		return nil, &Error{Op: "closed", Argv: spec.Argv, Err: errors.New("the host is shutting down")}
	}
	m.procs[id] = p
	m.terms[id] = t
	m.mu.Unlock()
	return t, nil
}

// terminalSize is a requested size with the defaults applied, or why it
// is out of range.
func terminalSize(cols, rows int) (int, int, error) {
	if cols == 0 {
		cols = DefaultTerminalCols
	}
	if rows == 0 {
		rows = DefaultTerminalRows
	}
	if cols < 1 || rows < 1 || cols > MaxTerminalSide || rows > MaxTerminalSide {
		return 0, 0, fmt.Errorf("a terminal of %d columns by %d rows: each must be 1 to %d", cols, rows, MaxTerminalSide)
	}
	return cols, rows, nil
}

// start opens the terminal and starts the command on it
// (startOnTerminal).
func (t *Terminal) start(path string, env []string) error {
	p := t.p
	attr, err := p.sysProcAttr()
	if err != nil {
		return err
	}
	tty, err := openTerminal(t.cols, t.rows)
	if err != nil {
		p.releaseTree()
		return err
	}
	t.slave = tty.slaveName()
	cmd := exec.Command(path, p.spec.Argv[1:]...)
	cmd.Args = p.spec.Argv
	cmd.Dir = p.spec.Dir
	cmd.Env = env
	cmd.SysProcAttr = attr
	waitFn, err := p.startOnTerminal(tty, cmd)
	if err != nil {
		tty.closeHost()
		p.releaseTree()
		return err
	}
	t.master, t.input = tty.master, tty.input
	p.cmd = cmd
	p.Pid = cmd.Process.Pid
	p.started = time.Now()
	var readers sync.WaitGroup
	readers.Add(1)
	go t.pump(&readers)
	p.watch()
	go func() {
		p.wait(&readers, t.master, nil, waitFn)
		p.releaseTree()
	}()
	return nil
}

// pump reads the master until the terminal hangs up. Each read(2) is
// made under readMu, and what it took is counted in held until add has
// it (observers can be slow): InFlight sees every byte on its way from
// the kernel to a read, and never a moment when it is in neither.
func (t *Terminal) pump(wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	var n int
	var rerr error
	// The file's poller waits while read says there is nothing.
	read := func(fd uintptr) bool {
		t.readMu.Lock()
		defer t.readMu.Unlock()
		for {
			n, rerr = rawRead(fd, buf)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			return false
		}
		t.held.Store(int64(max(n, 0)))
		return true
	}
	rc, err := t.master.SyscallConn()
	for err == nil {
		err = rc.Read(read)
		if n > 0 {
			t.add(buf[:n])
			t.held.Store(0)
		}
		if rerr != nil || n <= 0 {
			break // hung up (EIO), or at its end
		}
	}
	t.mu.Lock()
	t.eof = true
	t.wakeLocked()
	t.mu.Unlock()
	_ = t.master.Close()
	if t.input != t.master {
		_ = t.input.Close()
	}
}

// add hands output to the observers, then keeps it for reads: a read
// never returns a byte an observer (a screen) has not been given yet.
func (t *Terminal) add(b []byte) {
	t.obsMu.Lock()
	defer t.obsMu.Unlock()
	for _, w := range t.observers {
		_, _ = w.Write(b)
	}
	t.mu.Lock()
	t.total += int64(len(b))
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.dropped += int64(over)
		// A copy, so the buffer's array does not grow without bound.
		t.buf = append(make([]byte, 0, t.max), t.buf[over:]...)
	}
	t.wakeLocked()
	t.mu.Unlock()
}

func (t *Terminal) wakeLocked() {
	close(t.more)
	t.more = make(chan struct{})
}

// Observe hands w what the terminal holds unread now, then every later
// byte it prints, in order, from the goroutine that reads the terminal:
// this is where a screen (a terminal emulator fed with the output) plugs
// in. w should not block for long: while it does the terminal's output
// waits (a program that asks its terminal something must be answered
// through Write from another goroutine).
func (t *Terminal) Observe(w io.Writer) {
	t.obsMu.Lock()
	defer t.obsMu.Unlock()
	t.mu.Lock()
	held := append([]byte(nil), t.buf...)
	t.mu.Unlock()
	if len(held) > 0 {
		_, _ = w.Write(held)
	}
	t.observers = append(t.observers, w)
}

// Read consumes what the terminal printed since the previous read,
// waiting up to wait (at most 10 minutes) for output when there is none,
// and returns earlier when ctx ends. The read that reports the end has
// everything the terminal printed.
func (t *Terminal) Read(ctx context.Context, wait time.Duration) TerminalRead {
	wait = min(wait, maxTerminalWait)
	var timeout <-chan time.Time
	if wait > 0 {
		tm := time.NewTimer(wait)
		defer tm.Stop()
		timeout = tm.C
	}
	for {
		t.mu.Lock()
		ready := len(t.buf) > 0 || t.dropped > 0 || wait <= 0
		if t.eof && !ready {
			// Hung up: the end is near (the tree is being reaped).
			t.mu.Unlock()
			select {
			case <-t.p.Done():
			case <-timeout:
			case <-ctx.Done():
			}
			return t.take()
		}
		if ready {
			t.mu.Unlock()
			return t.take()
		}
		more := t.more
		t.mu.Unlock()
		select {
		case <-more:
		case <-timeout:
			wait = 0
		case <-ctx.Done():
			wait = 0
		}
	}
}

// take consumes the unread output; the state is read first, so a read
// that reports the end holds all of it.
func (t *Terminal) take() TerminalRead {
	st, code, sig := t.p.State()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := TerminalRead{Data: t.buf, Dropped: t.dropped, Total: t.total, Status: st, ExitCode: code, Signal: sig}
	t.buf, t.dropped = nil, 0
	return r
}

// Write writes input to the terminal, as if typed, within ctx. It returns
// false when the terminal's program had exited (nothing was written).
func (t *Terminal) Write(ctx context.Context, data []byte) (bool, error) {
	return t.WriteFor(ctx, "", data)
}

// WriteFor is Write under call, the host-stamped call the write serves:
// WroteFor tells afterwards whether that call wrote.
func (t *Terminal) WriteFor(ctx context.Context, call string, data []byte) (bool, error) {
	if t.p.finished() {
		return false, nil
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.writer.Store(&call)
	// A program that does not read its input lets the terminal's input
	// queue fill, and a write then waits: for as long as the caller does,
	// or until an interrupt discards the input.
	t.inMu.Lock()
	gen := t.discards
	if dl, ok := ctx.Deadline(); ok {
		_ = t.input.SetWriteDeadline(dl)
	} else {
		_ = t.input.SetWriteDeadline(time.Time{})
	}
	t.inMu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = t.input.SetWriteDeadline(time.Now()) })
	defer stop()
	_, err := t.input.Write(data)
	t.inMu.Lock()
	discarded := t.discards != gen
	t.inMu.Unlock()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EIO) || t.p.finished():
		return false, nil
	case discarded && errors.Is(err, os.ErrDeadlineExceeded):
		// Typed, and what the terminal had not taken yet went with the
		// rest of its unread input.
		return true, nil
	case ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded):
		// The write deadline is the caller's, and may pass a moment
		// before its context says so.
		cause := ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		return false, fmt.Errorf("write to terminal %s: the terminal took no more input: %w", t.p.ID, cause)
	}
	return false, fmt.Errorf("write to terminal %s: %w", t.p.ID, err)
}

// WroteFor reports whether the latest write was made under call (which
// must not be ""): a caller whose call failed tells by it whether any of
// its input was typed.
func (t *Terminal) WroteFor(call string) bool {
	w := t.writer.Load()
	return call != "" && w != nil && *w == call
}

// Input is the terminal's input as an io.Writer, for what answers its
// program from the host (a screen's replies to terminal queries): each
// write waits at most inputTimeout for the terminal to take it, and fails
// with io.ErrClosedPipe once the program has exited.
func (t *Terminal) Input() io.Writer { return terminalInput{t} }

// inputTimeout bounds one write through Input.
const inputTimeout = 5 * time.Second

type terminalInput struct{ t *Terminal }

func (in terminalInput) Write(p []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), inputTimeout)
	defer cancel()
	ok, err := in.t.Write(ctx, p)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, io.ErrClosedPipe
	}
	return len(p), nil
}

// Resize sets the terminal's size; its program gets SIGWINCH. A terminal
// whose program exited keeps its last size.
func (t *Terminal) Resize(cols, rows int) error {
	cols, rows, err := terminalSize(cols, rows)
	if err != nil {
		return err
	}
	if t.p.finished() {
		return nil
	}
	if err := t.p.resizeTerminal(t.master, cols, rows); err != nil {
		if errors.Is(err, os.ErrClosed) || t.p.finished() {
			return nil
		}
		return fmt.Errorf("resize terminal %s: %w", t.p.ID, err)
	}
	t.mu.Lock()
	t.cols, t.rows = cols, rows
	t.mu.Unlock()
	return nil
}

// Size is the terminal's size.
func (t *Terminal) Size() (cols, rows int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cols, t.rows
}

// Foreground is the terminal's foreground process group (tcgetpgrp on the
// master): the job its shell runs in the foreground, or the shell's own
// group at its prompt.
func (t *Terminal) Foreground() (int, error) {
	if t.p.finished() {
		return 0, fmt.Errorf("terminal %s: its program has exited", t.p.ID)
	}
	return foregroundGroup(t.master)
}

// Signal sends sig to the terminal's foreground process group, or with
// main to its main process alone, and returns the group or process
// signalled; ok is false once the program had exited.
func (t *Terminal) Signal(sig syscall.Signal, main bool) (pid int, ok bool, err error) {
	if t.p.finished() {
		return 0, false, nil
	}
	if main {
		pid = t.p.Pid
		err = t.p.signalProcess(pid, sig)
	} else {
		if pid, err = foregroundGroup(t.master); err == nil {
			err = t.p.signalProcess(-pid, sig)
		}
	}
	if err != nil {
		if t.p.finished() {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("signal terminal %s: %w", t.p.ID, err)
	}
	return pid, true, nil
}

// Interrupt sends sig to the terminal's foreground process group as the
// terminal's interrupt keys do (Ctrl-C, Ctrl-Z): what was typed and not
// read yet is discarded first (unless the terminal's modes say not to), a
// write still waiting for the terminal to take it included, so a line
// typed ahead of the interrupted program never runs after it. Writes wait
// until the signal is sent.
func (t *Terminal) Interrupt(sig syscall.Signal) (pid int, ok bool, err error) {
	if t.p.finished() {
		return 0, false, nil
	}
	// A write that waits for room stops at once; the queue is emptied
	// before the lock is waited for, so a write that comes meanwhile finds
	// room instead of waiting too.
	t.inMu.Lock()
	t.discards++
	_ = t.input.SetWriteDeadline(time.Now())
	derr := discardInput(t.slave)
	t.inMu.Unlock()
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	if derr == nil {
		// What the stopped write put in as it stopped.
		derr = discardInput(t.slave)
	}
	if derr != nil {
		if t.p.finished() {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("interrupt terminal %s: %w", t.p.ID, derr)
	}
	return t.Signal(sig, false)
}

// Close kills the terminal's tree and waits, within ctx, until it is gone
// (every process of it, setsid and nohup children included where trees
// are cgroups) and its output is collected.
func (t *Terminal) Close(ctx context.Context) error {
	t.p.kill(true)
	select {
	case <-t.p.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("terminal %s (pid %d) still running: %w", t.p.ID, t.p.Pid, ctx.Err())
	}
}

// Claim marks the terminal as read by its caller alone (ctx.terminals
// holds it): reads through ctx.subprocess are refused from then on, so
// output is never consumed twice. It returns false if it was claimed
// already.
func (t *Terminal) Claim() bool { return t.claimed.CompareAndSwap(false, true) }

// Claimed reports whether the terminal was claimed.
func (t *Terminal) Claimed() bool { return t.claimed.Load() }

// Master is the terminal's master side (on Windows the pseudo-console's
// output pipe), for what inspects the terminal in the host (what its
// foreground process waits for). Use its SyscallConn, never Fd (which
// would take it out of the poller the output is read through); it is
// closed once the terminal hangs up.
func (t *Terminal) Master() *os.File { return t.master }

// ID is the terminal's process id (as Process.ID); Pid its main process.
func (t *Terminal) ID() string { return t.p.ID }
func (t *Terminal) Pid() int   { return t.p.Pid }

// Owner is who the terminal belongs to.
func (t *Terminal) Owner() string { return t.p.spec.Owner }

// Done is closed when the terminal's program has ended, its tree is gone
// and its output is collected.
func (t *Terminal) Done() <-chan struct{} { return t.p.Done() }

// State reports the status, and once finished the exit code and signal.
func (t *Terminal) State() (Status, int, string) { return t.p.State() }

// Terminal returns the terminal of process id; owner must match unless it
// is "".
func (m *Manager) Terminal(owner, id string) (*Terminal, error) {
	if _, err := m.Get(owner, id); err != nil {
		return nil, err
	}
	m.mu.Lock()
	t, ok := m.terms[id]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("process %q is no terminal", id)
	}
	return t, nil
}

// CloseUnclaimed closes owner's terminals spawned under call that nobody
// claimed, and waits for them within ctx: what a caller leaves when its
// call fails after the spawn (the spawner crashed before it answered).
func (m *Manager) CloseUnclaimed(ctx context.Context, owner, call string) error {
	if call == "" {
		return nil
	}
	var left []*Terminal
	m.mu.Lock()
	for _, t := range m.terms {
		if t.p.spec.Owner == owner && t.p.spec.Call == call && !t.Claimed() {
			left = append(left, t)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, t := range left {
		errs = append(errs, t.Close(ctx))
		m.Forget(t.ID())
	}
	return errors.Join(errs...)
}

// Terminals lists owner's terminals.
func (m *Manager) Terminals(owner string) []*Terminal {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Terminal
	for _, t := range m.terms {
		if t.p.spec.Owner == owner {
			out = append(out, t)
		}
	}
	return out
}

// Printed counts every byte the terminal printed, read or not.
// InFlight counts the bytes on their way through the terminal: printed by
// its programs and not yet read by the host, and typed by the host and not
// yet read by its programs. A look at what the foreground waits for means
// something only once both are 0: a shell that has not read the typed
// line yet, or whose output the host has not read yet, still waits at its
// old prompt.
//
// With Printed, sampled before a look and again after InFlight, it tells
// whether the output of the look's moment has all been read and added:
// a byte is in the kernel's queue, held by the read that took it, or
// counted by Printed.
func (t *Terminal) InFlight() (int, error) {
	t.readMu.Lock()
	defer t.readMu.Unlock()
	n, err := inFlight(t.master, t.slave)
	return n + int(t.held.Load()), err
}

func (t *Terminal) Printed() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// Watch runs first, then hands w every byte the terminal prints from then
// on, in order, from the goroutine that reads the terminal, consuming
// nothing (reads still get all of it). Nothing is printed between the
// two, so first may take a picture of the screen (a screen's Repaint)
// that w's bytes continue. w must not block: the terminal's output waits
// on it. stop ends the watch; w gets nothing once it returns.
func (t *Terminal) Watch(first func(), w io.Writer) (stop func()) {
	t.obsMu.Lock()
	defer t.obsMu.Unlock()
	first()
	t.observers = append(t.observers, w)
	return func() {
		t.obsMu.Lock()
		defer t.obsMu.Unlock()
		if i := slices.Index(t.observers, w); i >= 0 {
			t.observers = slices.Delete(t.observers, i, i+1)
		}
	}
}

// AfterDone runs f in a goroutine of its own once the terminal's program
// has ended and its tree is gone (as Process.AfterDone).
func (t *Terminal) AfterDone(f func()) (stop func() bool) { return t.p.AfterDone(f) }
