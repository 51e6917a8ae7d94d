package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/dshrun/dsh/host/termsessions/settle"
	"github.com/dshrun/dsh/internal/kubetest"
	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/plugins/lib/kubeexec"
)

// relayed is a relay on a terminal of the test's, its shell in a pod.
type relayed struct {
	t       *testing.T
	cmd     *exec.Cmd
	master  *os.File
	out     *syncbuf.Buffer
	from    int // output before it was looked at already
	printed string
	exited  chan struct{} // closed once the relay has exited, with err
	err     error
}

// The plugin's binary, built once for the package's tests.
var binary struct {
	once sync.Once
	path string
	err  error
}

// built is the path of this plugin's binary, built for the tests.
func built(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "dsh-terminal-kubernetes-")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "dsh-terminal-kubernetes")
		build := exec.Command("go", "build", "-o", binary.path, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binary.path != "" {
		_ = os.RemoveAll(filepath.Dir(binary.path))
	}
	os.Exit(code)
}

// startRelay builds this plugin and starts its relay, as a session's
// terminal runs it, with a bash in pod of srv.
func startRelay(t *testing.T, srv *kubetest.Server, pod string) *relayed {
	t.Helper()
	bin := built(t)
	const nonce = "00112233aabbccdd"
	ps1, printed := Prompt(shellBash, nonce)
	spec, err := json.Marshal(relaySpec{
		Target:  kubeexec.Target{Kubeconfig: srv.Kubeconfig, Namespace: srv.Namespace, Pod: pod, Container: "main"},
		Command: Command(shellBash, "xterm-256color", "", RC(shellBash, ps1, nil), nonce, ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	argv := RelayArgv(bin)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), specVar + "=" + string(spec)}
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	r := &relayed{t: t, cmd: cmd, master: f, out: &syncbuf.Buffer{}, printed: string(printed), exited: make(chan struct{})}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			_, _ = r.out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
		}
		f.Close()
	})
	return r
}

// waitFor waits until the output since the last look holds want.
func (r *relayed) waitFor(what, want string) {
	r.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s := r.out.String()
		if i := strings.Index(s[r.from:], want); i >= 0 {
			r.from += i + len(want)
			return
		}
	}
	r.t.Fatalf("%s: no %q in %q", what, want, r.out.String()[r.from:])
}

func (r *relayed) typeLine(s string) {
	r.t.Helper()
	if _, err := r.master.WriteString(s + "\r"); err != nil {
		r.t.Fatal(err)
	}
}

// The relay on a terminal: the pod's terminal takes its size, at the start
// and after each change; the registry's look at the terminal finds no
// read of it while the shell in the pod waits at its prompt (the
// foreground stage reads nothing), and a SIGINT for the foreground
// interrupts what the shell runs; the relay exits with the shell's status.
func TestKubernetesRelay(t *testing.T) {
	needKubetest(t)
	srv := kubetest.New(t)
	if _, err := srv.AddPod("p", nil); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, srv, "p")
	r.waitFor("the first prompt", r.printed)
	// The spec, and the prompt's nonce in it, came on fd 3: it is in
	// neither stage's environment or command line.
	first := r.cmd.Process.Pid
	// A child is listed under the thread that started it.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", first))
	var kids []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		t.Fatalf("the relay's children: %q", kids)
	}
	for _, pid := range []string{fmt.Sprint(first), kids[0]} {
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile("/proc/" + pid + "/" + f)
			if err != nil || strings.Contains(string(b), specVar) || strings.Contains(string(b), "00112233aabbccdd") {
				t.Fatalf("/proc/%s/%s holds the spec: %q %v", pid, f, b, err)
			}
		}
	}
	r.typeLine("stty size")
	r.waitFor("the size at the start", "24 80\r\n")
	r.waitFor("the prompt", r.printed)
	if err := pty.Setsize(r.master, &pty.Winsize{Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	// The new size reaches the pod's terminal after the resize, but
	// nothing orders it before the next line: the line is typed until the
	// size shows.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(r.out.String()[r.from:], "43 132\r\n"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the size after a resize: %q", r.out.String()[r.from:])
		}
		r.typeLine("stty size")
	}
	r.waitFor("the new size", "43 132\r\n")

	// At the prompt: the foreground is the relay's first stage, which
	// waits on its child only.
	time.Sleep(300 * time.Millisecond)
	res, err := settle.Check(r.master, r.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason == settle.StdinRead || res.Process.Pid != r.cmd.Process.Pid {
		t.Fatalf("the look at a relay's terminal: %v (%s), want the relay's first stage not reading", res.Reason, res.Detail)
	}

	r.typeLine("sleep 60; echo not-inter''rupted")
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(-res.Pgrp, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the interrupt", "^C")
	r.waitFor("the prompt after an interrupt", r.printed)
	r.typeLine("exit 7")
	select {
	case <-r.exited:
		var ee *exec.ExitError
		if !errors.As(r.err, &ee) || ee.ExitCode() != 7 {
			t.Fatalf("the relay's exit: %v, want the shell's status 7", r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the relay did not exit after the shell did: %q", r.out.String()[r.from:])
	}
	if strings.Contains(r.out.String(), "\nnot-interrupted") {
		t.Fatalf("the sleep was not interrupted: %q", r.out.String())
	}
}

// A relay whose pod is deleted exits at once, with a line that says so.
func TestKubernetesRelayPodDeleted(t *testing.T) {
	needKubetest(t)
	srv := kubetest.New(t)
	if _, err := srv.AddPod("doomed", nil); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, srv, "doomed")
	r.waitFor("the first prompt", r.printed)
	r.typeLine("sleep 600")
	time.Sleep(200 * time.Millisecond)
	if err := srv.DeletePod("doomed"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
		var ee *exec.ExitError
		if !errors.As(r.err, &ee) || ee.ExitCode() != exitLost {
			t.Fatalf("the relay's exit: %v, want %d", r.err, exitLost)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the relay did not exit after its pod was deleted")
	}
	r.waitFor("the line that says why", "\r\ndsh: The connection to pod default/doomed was lost")
}

// A SIGTERM for the relay ends the exec, with a line that says so, and
// the relay exits as a process ended by it.
func TestKubernetesRelaySIGTERM(t *testing.T) {
	needKubetest(t)
	srv := kubetest.New(t)
	if _, err := srv.AddPod("p", nil); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, srv, "p")
	r.waitFor("the first prompt", r.printed)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
		var ee *exec.ExitError
		if !errors.As(r.err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Fatalf("the relay's exit: %v, want %d", r.err, 128+int(syscall.SIGTERM))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the relay did not exit after a SIGTERM")
	}
	r.waitFor("the line that says why", "dsh: SIGTERM ended the connection to pod default/p (container main): no signal can be sent into the pod")
}

// needKubetest skips where kubetest's pods cannot be made (they are
// namespaces of this machine, made by root).
func needKubetest(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kubetest's pods need root (unshare)")
	}
}
