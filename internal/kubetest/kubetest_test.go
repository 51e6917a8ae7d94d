//go:build linux

package kubetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/dshrun/dsh/internal/kubetest"
	"github.com/dshrun/dsh/internal/syncbuf"
)

// executors are the ways client-go runs an exec: each one alone, and the
// fallback kubectl uses (WebSocket first, SPDY when the upgrade fails).
var executors = []string{"spdy", "websocket", "fallback"}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kubetest runs pods in new namespaces and needs root")
	}
}

// client is what a plugin builds from the kubeconfig: a rest.Config and a clientset.
type client struct {
	cfg *rest.Config
	cs  *kubernetes.Clientset
	ns  string
}

func newClient(t *testing.T, s *kubetest.Server) *client {
	t.Helper()
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: s.Kubeconfig}, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", s.Kubeconfig, err)
	}
	ns, _, err := loader.Namespace()
	if err != nil || ns != "default" {
		t.Fatalf("kubeconfig namespace = %q, %v; want default", ns, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &client{cfg: cfg, cs: cs, ns: ns}
}

// executor builds client-go's executor of the given kind for an exec in pod.
func (c *client) executor(t *testing.T, kind, pod string, opts *corev1.PodExecOptions) remotecommand.Executor {
	t.Helper()
	u := c.cs.CoreV1().RESTClient().Post().Namespace(c.ns).Resource("pods").Name(pod).
		SubResource("exec").VersionedParams(opts, scheme.ParameterCodec).URL()
	spdy, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "spdy":
		return spdy
	case "websocket":
		return ws
	}
	fb, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	return fb
}

// run execs command in pod and returns stdout, stderr and the error.
func (c *client) run(t *testing.T, kind, pod string, stdin io.Reader, command ...string) (string, string, error) {
	t.Helper()
	opts := &corev1.PodExecOptions{Command: command, Stdin: stdin != nil, Stdout: true, Stderr: true}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.executor(t, kind, pod, opts).StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin: stdin, Stdout: &stdout, Stderr: &stderr,
	})
	return stdout.String(), stderr.String(), err
}

func start(t *testing.T) (*kubetest.Server, *client) {
	t.Helper()
	needRoot(t)
	s := kubetest.New(t)
	if _, err := s.AddPod("dev", map[string]string{"app": "dev"}); err != nil {
		t.Fatal(err)
	}
	return s, newClient(t, s)
}

func TestKubernetesExecServerStdoutStderrExitCode(t *testing.T) {
	_, c := start(t)
	for _, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			out, errOut, err := c.run(t, kind, "dev", nil, "sh", "-c", "echo out; echo err >&2")
			if err != nil || out != "out\n" || errOut != "err\n" {
				t.Fatalf("exec = stdout %q, stderr %q, %v; want \"out\\n\", \"err\\n\", nil", out, errOut, err)
			}
			out, _, err = c.run(t, kind, "dev", nil, "sh", "-c", "echo before; exit 3")
			var ee exec.CodeExitError
			if !errors.As(err, &ee) || ee.Code != 3 {
				t.Fatalf("exit 3: err = %#v, want exec.CodeExitError with code 3", err)
			}
			if out != "before\n" {
				t.Fatalf("exit 3: stdout = %q", out)
			}
			// A killed command reads as 128 plus the signal, as with container runtimes.
			_, _, err = c.run(t, kind, "dev", nil, "sh", "-c", "kill -9 $$")
			if !errors.As(err, &ee) || ee.Code != 137 {
				t.Fatalf("kill -9: err = %v, want exit code 137", err)
			}
			_, _, err = c.run(t, kind, "dev", nil, "no-such-command")
			if err == nil || !strings.Contains(err.Error(), `exec: "no-such-command": executable file not found in $PATH`) {
				t.Fatalf("missing command: %v", err)
			}
		})
	}
}

func TestKubernetesExecServerStdin(t *testing.T) {
	_, c := start(t)
	for _, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			out, _, err := c.run(t, kind, "dev", strings.NewReader("hello\nworld\n"), "sh", "-c", "tr a-z A-Z; echo done")
			if err != nil || out != "HELLO\nWORLD\ndone\n" {
				t.Fatalf("stdin: stdout %q, %v", out, err)
			}
			// A command that ends while the client still holds stdin open ends the call.
			inR, inW := io.Pipe()
			defer inW.Close()
			ended := make(chan error, 1)
			ex := c.executor(t, kind, "dev", &corev1.PodExecOptions{Command: []string{"echo", "bye"}, Stdin: true, Stdout: true})
			go func() {
				ended <- ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: inR, Stdout: io.Discard})
			}()
			select {
			case err := <-ended:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("exec with stdin left open did not end 10s after its command")
			}
		})
	}
}

// TestKubernetesExecServerPodNamespaces checks the command runs inside the
// pod's own PID, UTS and network namespaces, and that orphans are reaped.
func TestKubernetesExecServerPodNamespaces(t *testing.T) {
	_, c := start(t)
	out, _, err := c.run(t, "spdy", "dev", nil, "sh", "-c", "readlink /proc/self/ns/pid; hostname; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' \\n'")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Readlink("/proc/self/ns/pid")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] == self || lines[1] != "dev" || lines[2] != "lo" {
		t.Fatalf("in the pod: %q; want a PID namespace other than %s, hostname dev, only lo", out, self)
	}

	// An orphan exits inside the pod; PID 1 must reap it.
	if _, _, err := c.run(t, "spdy", "dev", nil, "sh", "-c", "sleep 0.1 & exit 0"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, err := c.run(t, "spdy", "dev", nil, "sh", "-c", "cat /proc/[0-9]*/stat")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a zombie stays in the pod: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countWriter counts bytes and checks each is the flood's byte.
type countWriter struct {
	mu  sync.Mutex
	n   int64
	bad int64
}

func (w *countWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range p {
		if b != 0 {
			w.bad++
		}
	}
	w.n += int64(len(p))
	return len(p), nil
}

func TestKubernetesExecServerFlood(t *testing.T) {
	_, c := start(t)
	const size = 100 << 20
	for _, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			opts := &corev1.PodExecOptions{Command: []string{"head", "-c", "104857600", "/dev/zero"}, Stdout: true, Stderr: true}
			var out countWriter
			var errOut bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			began := time.Now()
			err := c.executor(t, kind, "dev", opts).StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
			if err != nil {
				t.Fatalf("flood: %v (stderr %q)", err, errOut.String())
			}
			if out.n != size || out.bad != 0 {
				t.Fatalf("flood: got %d bytes (%d not zero), want %d zero bytes", out.n, out.bad, size)
			}
			t.Logf("%s: 100 MB in %v", kind, time.Since(began))
		})
	}
}

// TestKubernetesExecServerSlowReader has the client stop reading until its
// heartbeat (every 5 s) has gone out while the command's output, already
// complete on the server, still waits in the connections' buffers: the ping
// reaching a connection the server has closed must not cost that output.
func TestKubernetesExecServerSlowReader(t *testing.T) {
	_, c := start(t)
	const size = 8 << 20
	for _, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			opts := &corev1.PodExecOptions{Command: []string{"head", "-c", "8388608", "/dev/zero"}, Stdout: true}
			out := &slowWriter{delay: 7 * time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := c.executor(t, kind, "dev", opts).StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: out})
			if err != nil {
				t.Fatalf("slow reader: %v", err)
			}
			if out.n != size || out.bad != 0 {
				t.Fatalf("slow reader: got %d bytes (%d not zero), want %d zero bytes", out.n, out.bad, size)
			}
		})
	}
}

// slowWriter holds its first write for delay, then counts like countWriter.
type slowWriter struct {
	delay time.Duration
	countWriter
	waited bool
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if !w.waited {
		w.waited = true
		time.Sleep(w.delay)
	}
	return w.countWriter.Write(p)
}

func TestKubernetesExecServerErrors(t *testing.T) {
	s, c := start(t)
	for _, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			_, _, err := c.run(t, kind, "nope", nil, "true")
			if err == nil || !strings.Contains(err.Error(), `pods "nope" not found`) {
				t.Fatalf("missing pod: %v", err)
			}
			opts := &corev1.PodExecOptions{Command: []string{"true"}, Container: "side", Stdout: true}
			err = c.executor(t, kind, "dev", opts).StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard})
			if err == nil || !strings.Contains(err.Error(), `container "side" is not valid for pod "dev"`) {
				t.Fatalf("missing container: %v", err)
			}
		})
	}

	_, err := c.cs.CoreV1().Pods("default").Get(context.Background(), "nope", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `pods "nope" not found` {
		t.Fatalf("get missing pod: %v", err)
	}
	bad := rest.CopyConfig(c.cfg)
	bad.BearerToken = "wrong"
	badCS, err := kubernetes.NewForConfig(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := badCS.CoreV1().Pods("default").Get(context.Background(), "dev", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("wrong token: %v, want 401 Unauthorized", err)
	}

	s.Forbid("pods/exec")
	for _, kind := range executors {
		_, _, err := c.run(t, kind, "dev", nil, "true")
		want := `pods "dev" is forbidden: User "dsh-test" cannot create resource "pods/exec" in API group "" in the namespace "default"`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: forbidden exec: %v, want %s", kind, err, want)
		}
	}
	// Reading pods is still allowed.
	if _, err := c.cs.CoreV1().Pods("default").Get(context.Background(), "dev", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Forbid("pods")
	_, err = c.cs.CoreV1().Pods("default").Get(context.Background(), "dev", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("forbidden get: %v", err)
	}
}

func TestKubernetesExecServerPods(t *testing.T) {
	s, c := start(t)
	if _, err := s.AddPod("web", map[string]string{"app": "web"}, "nginx", "sidecar"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := c.cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning || len(p.Spec.Containers) != 2 || p.Spec.Containers[1].Name != "sidecar" || p.Labels["app"] != "web" {
		t.Fatalf("pod web = phase %s, containers %v, labels %v", p.Status.Phase, p.Spec.Containers, p.Labels)
	}
	list, err := c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=dev"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "dev" {
		t.Fatalf("list app=dev: %v, %v", list, err)
	}
	list, err = c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list all: %v, %v", list, err)
	}
	// kubectl get asks for rows to print.
	raw, err := c.cs.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	var table metav1.Table
	if err == nil {
		err = json.Unmarshal(raw, &table)
	}
	if err != nil || len(table.Rows) != 2 || table.Rows[1].Cells[0] != "web" || table.Rows[1].Cells[1] != "2/2" {
		t.Fatalf("pods as a table: %s, %v", raw, err)
	}
	opts := &corev1.PodExecOptions{Command: []string{"hostname"}, Container: "sidecar", Stdout: true}
	var out bytes.Buffer
	if err := c.executor(t, "spdy", "web", opts).StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.run(t, "spdy", "web", nil, "true")
	if err == nil || !strings.Contains(err.Error(), "a container name must be specified for pod web") {
		t.Fatalf("exec without a container in a two-container pod: %v", err)
	}

	if err := s.DeletePod("web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
}

// sizes is a TerminalSizeQueue fed by the test.
type sizes chan remotecommand.TerminalSize

func (q sizes) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &s
}

// waitFor polls until buf holds want, writing poke to w before each look.
func waitFor(t *testing.T, buf *syncbuf.Buffer, want string, w io.Writer, poke string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 10s; output %q", want, buf.String())
		}
		if poke != "" {
			if _, err := io.WriteString(w, poke); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestKubernetesExecServerTTYResize(t *testing.T) {
	_, c := start(t)
	for _, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			opts := &corev1.PodExecOptions{Command: []string{"sh"}, Stdin: true, Stdout: true, TTY: true}
			inR, inW := io.Pipe()
			defer inW.Close()
			var out syncbuf.Buffer
			q := make(sizes, 1)
			q <- remotecommand.TerminalSize{Width: 100, Height: 40}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			ex := c.executor(t, kind, "dev", opts)
			go func() {
				done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{
					Stdin: inR, Stdout: &out, Tty: true, TerminalSizeQueue: q,
				})
				close(q)
			}()
			// The first size and the first line travel apart, so ask until the size shows.
			waitFor(t, &out, "40 100", inW, "stty size\n")
			q <- remotecommand.TerminalSize{Width: 120, Height: 50}
			waitFor(t, &out, "50 120", inW, "stty size\n")
			if _, err := io.WriteString(inW, "tty; exit 4\n"); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				var ee exec.CodeExitError
				if !errors.As(err, &ee) || ee.Code != 4 {
					t.Fatalf("tty exit 4: %v; output %q", err, out.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("tty exec did not end; output %q", out.String())
			}
			if !strings.Contains(out.String(), "/dev/pts/") {
				t.Fatalf("tty: output %q has no /dev/pts/ terminal", out.String())
			}
		})
	}
}

// alive reports whether process pid exists on this machine.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// startLong starts a long command in pod and returns once it printed "started".
func startLong(t *testing.T, c *client, kind, pod string, ctx context.Context) (<-chan error, *syncbuf.Buffer) {
	t.Helper()
	opts := &corev1.PodExecOptions{Command: []string{"sh", "-c", "echo started; exec sleep 4321"}, Stdout: true, Stderr: true}
	var out syncbuf.Buffer
	done := make(chan error, 1)
	ex := c.executor(t, kind, pod, opts)
	go func() {
		done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	}()
	waitFor(t, &out, "started", nil, "")
	return done, &out
}

func TestKubernetesExecServerDeletePodEndsExec(t *testing.T) {
	s, c := start(t)
	for _, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			p, err := s.AddPod("doomed", nil)
			if err != nil {
				t.Fatal(err)
			}
			done, out := startLong(t, c, kind, "doomed", context.Background())
			began := time.Now()
			if err := s.DeletePod("doomed"); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), `pod "doomed" was deleted`) {
					t.Fatalf("exec in a deleted pod ended with %v, want an error saying the pod was deleted; output %q", err, out.String())
				}
				t.Logf("ended after %v: %v", time.Since(began), err)
			case <-time.After(10 * time.Second):
				t.Fatal("exec in a deleted pod still running after 10s")
			}
			if alive(p.Pid) {
				t.Fatalf("pod holder %d still alive", p.Pid)
			}
			_, _, err = c.run(t, kind, "doomed", nil, "true")
			if err == nil || !strings.Contains(err.Error(), `pods "doomed" not found`) {
				t.Fatalf("exec after delete: %v", err)
			}
		})
	}
}

// TestKubernetesExecServerCancelEndsCommand checks a client that goes away
// takes its command in the pod with it.
func TestKubernetesExecServerCancelEndsCommand(t *testing.T) {
	_, c := start(t)
	for _, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done, _ := startLong(t, c, kind, "dev", ctx)
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("cancelled exec still running after 10s")
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				out, _, err := c.run(t, "spdy", "dev", nil, "sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(out, "sleep 4321") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the cancelled command still runs in the pod after 10s: %q", out)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestKubernetesExecServerKeepsExecsOnDisconnect checks the runtimes' way:
// a client that goes away closes its command's stdin, and leaves running
// what does not read it.
func TestKubernetesExecServerKeepsExecsOnDisconnect(t *testing.T) {
	s, c := start(t)
	s.KeepExecsOnDisconnect(true)
	for i, kind := range executors {
		t.Run(kind, func(t *testing.T) {
			sleep := "sleep 432" + string(rune('5'+i))         // each subtest its own
			mark := filepath.Join(t.TempDir(), "stdin-closed") // the pod sees this machine's files
			opts := &corev1.PodExecOptions{Command: []string{"sh", "-c", sleep + " & echo started; cat >/dev/null; touch " + mark + "; wait"}, Stdin: true, Stdout: true, Stderr: true}
			var out syncbuf.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			pr, pw := io.Pipe()
			defer pw.Close()
			ex := c.executor(t, kind, "dev", opts)
			go func() {
				done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: pr, Stdout: &out, Stderr: &out})
			}()
			waitFor(t, &out, "started", nil, "")
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("cancelled exec still running after 10s")
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if _, err := os.Stat(mark); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the command's stdin did not close when its client went away")
				}
			}
			time.Sleep(300 * time.Millisecond) // what a kill would take
			out2, _, err := c.run(t, "spdy", "dev", nil, "sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out2, sleep) {
				t.Fatalf("the command was killed when its client went away: %q", out2)
			}
		})
	}
}

func TestKubernetesExecServerCloseKillsPods(t *testing.T) {
	needRoot(t)
	s, err := kubetest.Start()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.AddPod("dev", nil)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	c := newClient(t, s)
	done, _ := startLong(t, c, "websocket", "dev", context.Background())
	s.Close()
	if alive(p.Pid) {
		t.Fatalf("pod holder %d alive after Close", p.Pid)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("exec ended without an error when the server closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exec still running 10s after Close")
	}
}
