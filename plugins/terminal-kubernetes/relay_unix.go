//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/dshrun/dsh/plugins/lib/kubeexec"
)

// relay is the program on a session's terminal. It puts the terminal in
// raw mode (the shell in the container has a terminal of its own, which
// echoes, edits lines and turns keys into signals) and starts the copy
// stage in a session of its own, then waits for it, forwarding the
// signals the terminal or the registry sends it, and exits as it does.
//
// The copy stage reads the terminal from outside the terminal's session
// on purpose: the registry tells a program waiting for input by a thread
// of the terminal's foreground blocked reading it, and a relay always
// waits on the terminal, whether the shell in the pod waits for input or
// runs a command. The foreground is this stage, which waits on its child
// only, so the registry sees no read and settles a wait on how long the
// output has been quiet.
func relay() int {
	if _, err := term.MakeRaw(0); err != nil {
		fmt.Fprintf(os.Stderr, "dsh: the terminal cannot be put in raw mode: %v\r\n", err)
		return exitLost
	}
	sigs := make(chan os.Signal, 16)
	forwarded := []os.Signal{syscall.SIGINT, syscall.SIGTSTP, syscall.SIGQUIT, syscall.SIGWINCH, syscall.SIGTERM, syscall.SIGHUP}
	signal.Notify(sigs, forwarded...)
	// A background read or write of the terminal stops nothing here.
	signal.Ignore(syscall.SIGTTIN, syscall.SIGTTOU)
	cmd := exec.Command("/proc/self/exe", argCopy)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	spec := os.NewFile(specFD, "spec")
	cmd.ExtraFiles = []*os.File{spec}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "dsh: the relay cannot start: %v\r\n", err)
		return exitLost
	}
	spec.Close()
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return exitLost
	}
	return 0
}

// keys are what a signal for the foreground becomes in the container: the
// key its terminal turns into that signal.
var keys = map[os.Signal]string{syscall.SIGINT: "\x03", syscall.SIGTSTP: "\x1a", syscall.SIGQUIT: "\x1c"}

// relayCopy is the copy stage: it opens the exec the spec names with a
// terminal the size of this one, copies the terminal to it and it to the
// terminal, types the key of each interrupt it is sent, passes each size
// the terminal takes (SIGWINCH) on, and ends the exec on SIGTERM or
// SIGHUP. It exits with the shell's exit status; 128 and the signal's
// number after one of those (with a line that says so); or 255 with a
// line saying why when the connection ended without a status.
func relayCopy() int {
	// Signals are held from the start: one forwarded while the connection
	// is made (a credential plugin may take seconds) is handled once the
	// exec is there, not the default death.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTSTP, syscall.SIGQUIT, syscall.SIGWINCH, syscall.SIGTERM, syscall.SIGHUP)
	f := os.NewFile(specFD, "spec")
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	f.Close()
	var spec relaySpec
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dsh: the relay was started without its spec: %v\r\n", err)
		return exitLost
	}
	// client-go's own log lines would land on the session's screen.
	kubeexec.Quiet()
	t := spec.Target
	where := "pod " + t.Namespace + "/" + t.Pod + " (container " + t.Container + ")"
	conn, err := kubeexec.Connect(t)
	if err != nil {
		fmt.Fprintf(os.Stderr, "\r\ndsh: no shell could be opened in %s: %v\r\n", where, err)
		return exitLost
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	in := &input{r: os.Stdin, gone: cancel}
	in.pr, in.pw = io.Pipe()
	go in.copy()
	sizes := newSizeQueue(ctx)
	sizes.push(0)
	var ended atomic.Value // the signal that ended the exec
	go func() {
		for s := range sigs {
			switch {
			case s == syscall.SIGWINCH:
				sizes.push(0)
			case keys[s] != "":
				// Not in this loop: a write waits while the exec takes
				// no input, and a SIGTERM must still end it.
				go in.write([]byte(keys[s]))
			default:
				ended.CompareAndSwap(nil, s)
				cancel()
			}
		}
	}()
	// The dead-man switch: an exec beside the shell's whose input ends
	// with this process, however it ends, and which then ends every
	// marked process of the session in the container.
	if spec.ID != "" {
		hold, _ := io.Pipe()
		go func() {
			_, _ = conn.Exec(ctx, t.Pod, t.Container, kubeexec.ExecOptions{Command: kubeexec.WatcherArgv(spec.ID, endGraceMs), Stdin: hold, Stdout: io.Discard, Stderr: io.Discard})
		}()
	}
	code, err := conn.Exec(ctx, t.Pod, t.Container, kubeexec.ExecOptions{
		Command: spec.Command,
		Stdin:   in.pr,
		Stdout:  os.Stdout,
		TTY:     true,
		Resize:  sizes,
	})
	endSession(conn, t, spec.ID)
	if s, ok := ended.Load().(syscall.Signal); ok {
		// No signal reaches a process in the pod: the connection ends
		// instead, as kubectl's does when it is signalled.
		fmt.Fprintf(os.Stderr, "\r\ndsh: %s ended the connection to %s: no signal can be sent into the pod\r\n", unix.SignalName(s), where)
		return 128 + int(s)
	}
	if err == nil {
		return code
	}
	fmt.Fprintf(os.Stderr, "\r\ndsh: %v\r\n", conn.Explain(err, t.Pod, t.Container))
	return exitLost
}

// input is what the exec reads: the terminal's bytes and the keys of the
// interrupts, one write at a time.
type input struct {
	r    io.Reader
	gone func() // ends the exec: the terminal is gone
	mu   sync.Mutex
	pr   *io.PipeReader
	pw   *io.PipeWriter
}

func (in *input) copy() {
	buf := make([]byte, 32<<10)
	for {
		n, err := in.r.Read(buf)
		if n > 0 {
			in.write(buf[:n])
		}
		if err != nil {
			// In raw mode a read fails only when the terminal is gone; an
			// input that ends does not end a shell on a terminal, so the
			// exec is ended here (and the watcher in the pod with it).
			in.pw.CloseWithError(err)
			in.gone()
			return
		}
	}
}

func (in *input) write(b []byte) {
	in.mu.Lock()
	defer in.mu.Unlock()
	_, _ = in.pw.Write(b)
}

// sizeQueue hands the terminal's sizes to the exec: the latest one only,
// as a size queued and not yet sent is out of date once another comes.
type sizeQueue struct {
	done <-chan struct{} // closed once the exec is over
	ch   chan remotecommand.TerminalSize
}

func newSizeQueue(ctx context.Context) *sizeQueue {
	return &sizeQueue{done: ctx.Done(), ch: make(chan remotecommand.TerminalSize, 1)}
}

// push queues the size of terminal fd.
func (q *sizeQueue) push(fd int) {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return
	}
	s := remotecommand.TerminalSize{Width: ws.Col, Height: ws.Row}
	select {
	case <-q.ch:
	default:
	}
	q.ch <- s
}

// Next is the next size, or nil once the exec is over.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.ch:
		return &s
	case <-q.done:
		return nil
	}
}

// endSession ends what is left of the session in the container: a
// container runtime keeps an exec's processes running when its client
// goes, so a shell whose connection ended, or the jobs a shell that
// exited left behind, would outlive the session. It is bounded, as the
// host gives a stopping relay a grace before it kills it.
func endSession(conn *kubeexec.Conn, t kubeexec.Target, id string) {
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), endBound)
	defer cancel()
	_, _ = conn.Exec(ctx, t.Pod, t.Container, kubeexec.ExecOptions{Command: kubeexec.KillArgv(id, endGraceMs), Stdout: io.Discard, Stderr: io.Discard})
}

const (
	endGraceMs = 1000            // TERM, then KILL after this
	endBound   = 2 * time.Second // the whole of it
)
