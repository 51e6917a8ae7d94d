package kubeexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Job is what a relay is given on descriptor 3: the target as the
// executor resolved it, the pod it picked, and the command.
type Job struct {
	Target    Target            `json:"target"`
	Pod       string            `json:"pod"`
	UID       string            `json:"uid"`
	Container string            `json:"container"`
	ID        string            `json:"id"`
	Dir       string            `json:"dir"`
	Command   string            `json:"command"`
	Env       map[string]string `json:"env"`
	Stdin     []byte            `json:"stdin"`
	GraceMs   int64             `json:"graceMs"`
}

// RelayArg is the first argument that makes an executor's binary a relay.
const RelayArg = "relay"

// The relay's own exit codes: the command's end is unknown (the pod is
// gone, the connection lost), and the job could not be read.
const (
	ExitLost   = 255
	ExitNoJob  = 125
	watchAfter = 2 * time.Second // a short command costs no pod watch
	watchEvery = 3 * time.Second
)

// Relay is a relay process's whole life: it reads a Job from job, runs
// the command in the pod with Wrapper, copies its stdout and stderr to
// its own, and returns the exit code to exit with. Told to stop (SIGTERM,
// SIGINT, SIGHUP), it ends the command's tree in the pod (the wrapper's
// watcher, and a second exec running KillScript), and when the command
// then dies of the signal it dies of the same one, so its end reads as a
// local command's. A pod that goes, or a connection that is lost, ends
// it with ExitLost and one sentence on stderr: never a hang.
func Relay(job io.Reader, stdout, stderr io.Writer) int {
	Quiet()
	var j Job
	if err := json.NewDecoder(job).Decode(&j); err != nil {
		fmt.Fprintf(stderr, "The command could not be handed to the pod: %v.\n", err)
		return ExitNoJob
	}
	c, err := Connect(j.Target)
	if err != nil {
		fmt.Fprintln(stderr, unusable(j.Target, err))
		return ExitLost
	}
	r := &relay{c: c, j: j, ack: make(chan struct{}), stop: make(chan struct{})}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case s := <-sigs:
			r.signalled(ctx, s, cancel)
		case <-ctx.Done():
		}
	}()
	go r.watch(ctx, cancel)

	errw := &tailWriter{w: stderr}
	header := Header(j.Dir, j.Command, j.Env)
	pr, pw := io.Pipe()
	go r.feed(ctx, pw, header)
	code, err := c.Exec(ctx, j.Pod, j.Container, ExecOptions{
		Command: WrapperArgv(j.ID, len(header), len(j.Stdin), j.GraceMs),
		Stdin:   pr,
		Stdout:  &ackWriter{w: stdout, ack: r.ack},
		Stderr:  errw,
	})
	cancel()
	_ = pr.Close()

	r.mu.Lock()
	sig, gone := r.sig, r.gone
	r.mu.Unlock()
	if gone == "" && (err != nil || code == 128+9 || code == 128+15) {
		// A lost connection or a killed wrapper: the pod's going may be why.
		actx, acancel := context.WithTimeout(context.Background(), 5*time.Second)
		gone = c.Gone(actx, j.Pod, j.UID)
		acancel()
	}
	switch {
	case gone != "":
		errw.line(fmt.Sprintf("The pod %s/%s is gone (%s), and the command with it.", c.Namespace, j.Pod, gone))
		return ExitLost
	case err != nil && sig == nil:
		errw.line(c.Explain(err, j.Pod, j.Container).Error())
		return ExitLost
	}
	if s, ok := sig.(syscall.Signal); ok && (code == 128+int(s) || code == 128+int(syscall.SIGTERM) || code == 128+int(syscall.SIGKILL) || err != nil) {
		// Stopped as asked: end as a local command stopped by the signal.
		died := syscall.SIGTERM
		if code == 128+int(syscall.SIGKILL) {
			died = syscall.SIGKILL
		}
		dieOf(died)
	}
	if err != nil {
		return ExitLost
	}
	return code
}

type relay struct {
	c    *Conn
	j    Job
	ack  chan struct{}
	stop chan struct{} // closed when told to stop: the command's input ends

	mu   sync.Mutex
	sig  os.Signal
	gone string
	once sync.Once
}

// feed writes the wrapper's stdin: the header, the command's input once
// the wrapper has read the header, then nothing until the relay ends or
// is told to stop, when stdin closes and the wrapper's watcher ends the
// command.
func (r *relay) feed(ctx context.Context, w *io.PipeWriter, header string) {
	defer w.Close()
	if _, err := io.WriteString(w, header); err != nil {
		return
	}
	if len(r.j.Stdin) > 0 {
		select {
		case <-r.ack:
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = w.Write(r.j.Stdin)
		}()
		select {
		case <-done:
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		}
	}
	select {
	case <-r.stop:
	case <-ctx.Done():
	}
}

// signalled ends the command in the pod: its stdin closes (the wrapper's
// watcher sends TERM, then KILL after the grace) and a second exec runs
// KillScript, for a server that cannot close an exec's stdin. If the
// command outlives the grace by far, the relay stops waiting for it.
func (r *relay) signalled(ctx context.Context, s os.Signal, cancel context.CancelFunc) {
	r.mu.Lock()
	r.sig = s
	r.mu.Unlock()
	r.once.Do(func() { close(r.stop) })
	go func() {
		kctx, kcancel := context.WithTimeout(ctx, time.Duration(r.j.GraceMs)*time.Millisecond+10*time.Second)
		defer kcancel()
		_, _ = r.c.Exec(kctx, r.j.Pod, r.j.Container, ExecOptions{Command: KillArgv(r.j.ID, r.j.GraceMs), Stdout: io.Discard, Stderr: io.Discard})
	}()
	select {
	case <-time.After(time.Duration(r.j.GraceMs)*time.Millisecond + 10*time.Second):
		cancel()
	case <-ctx.Done():
	}
}

// watch asks after the pod while the command runs (from watchAfter on, so
// a short command costs nothing): a pod deleted or stopped ends the exec,
// whether or not the connection says so.
func (r *relay) watch(ctx context.Context, cancel context.CancelFunc) {
	select {
	case <-time.After(watchAfter):
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		actx, acancel := context.WithTimeout(ctx, watchEvery)
		gone := r.c.Gone(actx, r.j.Pod, r.j.UID)
		acancel()
		if gone != "" && ctx.Err() == nil {
			r.mu.Lock()
			r.gone = gone
			r.mu.Unlock()
			cancel()
			return
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// ackWriter passes the command's stdout on without the wrapper's first
// byte (Ack), closing ack when it comes.
type ackWriter struct {
	w    io.Writer
	ack  chan struct{}
	seen bool
}

func (a *ackWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !a.seen && len(p) > 0 {
		a.seen = true
		if p[0] == Ack {
			p = p[1:]
		}
		close(a.ack)
	}
	if len(p) == 0 {
		return n, nil
	}
	if _, err := a.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// tailWriter passes the command's stderr on and remembers whether it
// ended a line, so the relay's own sentence starts on a line of its own.
type tailWriter struct {
	w       io.Writer
	mu      sync.Mutex
	partial bool
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) > 0 {
		t.partial = p[len(p)-1] != '\n'
	}
	return t.w.Write(p)
}

// line writes s as a line of its own.
func (t *tailWriter) line(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.partial {
		s = "\n" + s
	}
	_, _ = io.WriteString(t.w, s+"\n")
	t.partial = false
}

// unusable is the sentence for a target whose config no longer loads in
// the relay: a kubeconfig removed or broken since the executor read it.
func unusable(t Target, err error) string {
	if t.InCluster {
		return fmt.Sprintf("The service account of the pod dsh runs in cannot be used: %s.", plain(causeOf(err).Error()))
	}
	where := "The default kubeconfig"
	if t.Kubeconfig != "" {
		where = "The kubeconfig " + t.Kubeconfig
	}
	if errors.Is(err, fs.ErrNotExist) {
		return where + " does not exist."
	}
	if t.Context != "" {
		where += " (context " + t.Context + ")"
	}
	return fmt.Sprintf("%s cannot be used: %s.", where, plain(causeOf(err).Error()))
}

// causeOf is err without restConfig's "config: <where>: " prefix.
func causeOf(err error) error {
	if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), "config: ") {
		return inner
	}
	return err
}
