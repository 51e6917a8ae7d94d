//go:build linux

package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// pod is one pod's namespaces on this machine: a holder process made by
// unshare, whose child is the pod's PID 1 and keeps the namespaces alive.
type pod struct {
	name       string
	labels     map[string]string
	containers []string
	created    time.Time
	uid        string

	holder  *exec.Cmd     // the unshare process
	pid     int           // its child: PID 1 inside the pod
	exited  chan struct{} // closed once holder has been waited for
	deleted atomic.Bool   // set before the pod is killed, so its execs can say why they ended
}

// hasContainer reports whether the pod declares container c.
func (p *pod) hasContainer(c string) bool {
	for _, name := range p.containers {
		if name == c {
			return true
		}
	}
	return false
}

// holderScript is the pod's PID 1; $0 is the pod's name, which becomes its
// hostname as in Kubernetes. Processes orphaned inside the pod are handed to
// PID 1, and the shell's wait reaps any child, so they leave no zombies.
const holderScript = `hostname "$0" 2>/dev/null; while :; do sleep 3600 & wait; done`

// startPod starts the holder of a new pod. unshare remounts /proc inside the
// new mount namespace with private propagation, so nothing leaks to this
// machine's mounts; --kill-child takes PID 1 (and with it the whole PID
// namespace) down when unshare dies. start runs cmd.Start on the thread
// whose end kills the holder (see holderThread).
func startPod(name string, start func(*exec.Cmd) error) (*pod, error) {
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
		"--mount", "--net", "--uts", "sh", "-c", holderScript, name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := start(cmd); err != nil {
		return nil, fmt.Errorf("pod %q: start unshare: %w", name, err)
	}
	p := &pod{name: name, holder: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	pid, err := childOf(cmd.Process.Pid, p.exited)
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("pod %q: %w", name, err)
	}
	p.pid = pid
	return p, nil
}

// holderThread starts pod holders from one OS thread that lives as long as
// the server. The kernel sends Pdeathsig when the thread that forked a
// process ends, not when the process does, and Go may end other threads while
// the process lives; this one ends only when stop closes or the process dies,
// and the holders (and so their pods) die with it.
type holderThread struct {
	reqs chan holderReq
	stop chan struct{}
	done chan struct{}
}

type holderReq struct {
	cmd *exec.Cmd
	err chan error
}

func newHolderThread() *holderThread {
	h := &holderThread{reqs: make(chan holderReq), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		// Never unlocked: the thread exits with this goroutine.
		goruntime.LockOSThread()
		for {
			select {
			case r := <-h.reqs:
				r.err <- r.cmd.Start()
			case <-h.stop:
				return
			}
		}
	}()
	return h
}

// start starts cmd on the holder thread.
func (h *holderThread) start(cmd *exec.Cmd) error {
	r := holderReq{cmd: cmd, err: make(chan error, 1)}
	select {
	case h.reqs <- r:
		return <-r.err
	case <-h.done:
		return errors.New("the server is closed")
	}
}

// close ends the thread once the pods are gone.
func (h *holderThread) close() {
	close(h.stop)
	<-h.done
}

// childOf waits (bounded) until process parent has a child and returns its pid.
func childOf(parent int, exited <-chan struct{}) (int, error) {
	file := fmt.Sprintf("/proc/%d/task/%d/children", parent, parent)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return 0, errors.New("unshare exited before the pod's first process started")
		default:
		}
		b, err := os.ReadFile(file)
		if err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, errors.New("the pod's first process did not start within 10s")
}

// kill ends every process of the pod: killing PID 1 of a PID namespace makes
// the kernel kill all others in it. It returns once the holder is reaped.
// unshare reaps PID 1 and exits, so nothing is left as a zombie.
func (p *pod) kill() {
	p.deleted.Store(true)
	if p.pid > 0 {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	} else {
		_ = syscall.Kill(-p.holder.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.holder.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
	}
}

// podRuntime runs exec calls inside the pods of a Server; it is the
// streaming.Runtime behind the kubelet's streaming server.
type podRuntime struct {
	s *Server
}

// Exec runs cmd in the namespaces of the pod named by containerID
// ("pod/container"). A non-zero exit comes back as a utilexec.ExitError so
// the streaming server reports the exit code to the client.
func (r *podRuntime) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	podName, _, _ := strings.Cut(containerID, "/")
	p, done, err := r.s.beginExec(podName)
	if err != nil {
		return err
	}
	defer done()
	if len(cmd) == 0 {
		return fmt.Errorf("pod %q: empty command", podName)
	}
	// The pod's files are this machine's, so the lookup here is the pod's;
	// the message is the one container runtimes give.
	if !strings.Contains(cmd[0], "/") && !inPodPath(cmd[0]) {
		return fmt.Errorf("exec: %q: executable file not found in $PATH", cmd[0])
	}

	args := []string{"-t", strconv.Itoa(p.pid), "-p", "-m", "-n", "-u", "--"}
	if tty {
		// The command leads its own session on the terminal inside the pod,
		// so a shell's job control sees process groups of its PID namespace.
		args = append(args, "setsid", "--ctty")
	}
	args = append(args, cmd...)
	c := exec.Command("nsenter", args...)
	c.Dir = "/"
	c.Env = []string{"PATH=" + podPath, "HOME=/root", "HOSTNAME=" + podName}
	if tty {
		c.Env = append(c.Env, "TERM=xterm")
	}

	var wait func() error
	if tty {
		wait, err = startTTY(c, in, out, resize)
	} else {
		wait, err = startPipes(c, in, out, errw)
	}
	if err != nil {
		return fmt.Errorf("pod %q: start %q: %w", podName, cmd[0], err)
	}

	// A cancelled call (client gone, server closing) closes the command's
	// stdin and its output; unless the server is told to keep them, as
	// container runtimes do, it also ends every process the command started.
	stop := context.AfterFunc(ctx, func() {
		if !r.s.keepExecs.Load() {
			killTree(c.Process.Pid)
		}
	})
	defer stop()

	err = wait()
	if p.deleted.Load() {
		return fmt.Errorf("pod %q was deleted while %q ran", podName, cmd[0])
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws, ok := ee.Sys().(syscall.WaitStatus)
		switch {
		case ok && ws.Exited():
			return utilexec.CodeExitError{Err: fmt.Errorf("command %q exited with status %d", cmd[0], ws.ExitStatus()), Code: ws.ExitStatus()}
		case ok && ws.Signaled():
			// nsenter re-raises its child's signal; container runtimes report
			// a killed command as 128 plus the signal's number.
			code := 128 + int(ws.Signal())
			return utilexec.CodeExitError{Err: fmt.Errorf("command %q was killed by %v", cmd[0], ws.Signal()), Code: code}
		}
		return fmt.Errorf("pod %q: command %q ended: %v", podName, cmd[0], ee)
	}
	return err
}

// podPath is $PATH for commands in a pod, the usual one of container images.
const podPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// inPodPath reports whether name is an executable file in podPath.
func inPodPath(name string) bool {
	for _, dir := range strings.Split(podPath, ":") {
		if fi, err := os.Stat(dir + "/" + name); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// startPipes starts c with its own pipes. Wait returns when the command has
// exited and its output is copied; stdin is not waited for, since a client
// may keep it open after the command ends.
func startPipes(c *exec.Cmd, in io.Reader, out, errw io.Writer) (func() error, error) {
	var closeAfterStart []*os.File
	var copies sync.WaitGroup
	if in != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		c.Stdin = r
		closeAfterStart = append(closeAfterStart, r)
		go func() {
			_, _ = io.Copy(w, in)
			_ = w.Close()
		}()
	}
	pipeOut := func(dst io.Writer) (*os.File, error) {
		if dst == nil {
			return nil, nil
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		closeAfterStart = append(closeAfterStart, w)
		copies.Add(1)
		go func() {
			defer copies.Done()
			_, _ = io.Copy(dst, r)
			_ = r.Close()
		}()
		return w, nil
	}
	stdout, err := pipeOut(out)
	if err != nil {
		return nil, err
	}
	stderr, err := pipeOut(errw)
	if err != nil {
		return nil, err
	}
	if stdout != nil {
		c.Stdout = stdout
	}
	if stderr != nil {
		c.Stderr = stderr
	}
	err = c.Start()
	for _, f := range closeAfterStart {
		_ = f.Close()
	}
	if err != nil {
		return nil, err
	}
	return func() error {
		err := c.Wait()
		copies.Wait()
		return err
	}, nil
}

// startTTY starts c on a new terminal and applies the client's resize events.
func startTTY(c *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommandserver.TerminalSize) (func() error, error) {
	ptmx, err := pty.Start(c)
	if err != nil {
		return nil, err
	}
	finished := make(chan struct{})
	resized := make(chan struct{}) // closed when resizing has stopped, before ptmx closes
	if resize == nil {
		close(resized)
	} else {
		go func() {
			defer close(resized)
			for {
				select {
				case size, ok := <-resize:
					if !ok {
						return
					}
					_ = pty.Setsize(ptmx, &pty.Winsize{Rows: size.Height, Cols: size.Width})
				case <-finished:
					return
				}
			}
		}()
	}
	if in != nil {
		go func() { _, _ = io.Copy(ptmx, in) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if out != nil {
			_, _ = io.Copy(out, ptmx) // ends with EIO once the last slave fd closes
		} else {
			_, _ = io.Copy(io.Discard, ptmx)
		}
	}()
	return func() error {
		err := c.Wait()
		close(finished)
		<-resized
		// A background process may hold the terminal open; do not wait for it forever.
		select {
		case <-copied:
		case <-time.After(2 * time.Second):
		}
		_ = ptmx.Close()
		return err
	}, nil
}

// Attach is not offered: pods here have no main process to attach to.
func (r *podRuntime) Attach(ctx context.Context, containerID string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	return fmt.Errorf("container %q: attach is not supported by the test server", containerID)
}

// PortForward is not offered by the test server.
func (r *podRuntime) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	return fmt.Errorf("pod %q: port forwarding is not supported by the test server", podSandboxID)
}

// killTree kills every process below pid on this machine, again while new
// ones show up (a process may fork before its signal lands). pid itself
// (nsenter) is left to reap its child and exit with the child's signal: were
// it killed first, its child would be handed to this machine's init, and the
// pod's PID namespace could not end until that init reaped it. Processes are
// not stopped first, since nsenter stops itself when its child stops.
func killTree(pid int) {
	seen := map[int]bool{}
	for round := 0; round < 5; round++ {
		grew := false
		for _, p := range descendants(pid) {
			if !seen[p] {
				seen[p] = true
				grew = true
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if !grew {
			break
		}
	}
}

// descendants lists the processes below pid, read from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces; the fields after its ")" do not.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], n)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
