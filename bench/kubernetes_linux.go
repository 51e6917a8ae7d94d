package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/dshrun/dsh/internal/kubetest"
	"github.com/dshrun/dsh/plugins/lib/kubeexec"
)

// kubernetesCalls: the bash tool's `true` through bash-kubernetes against
// the test exec server (the kubelet's streaming code behind an API-server
// route), through bash-local, and a bare client-go exec of `true` (the
// executor kubectl uses), interleaved call by call in one run: what dsh
// adds to an exec is the difference of the medians. Then a 100 MB flood
// through the bash tool against the bare exec's.
func kubernetesCalls(dir string, n int) {
	fmt.Println("bash tool `true` through bash-kubernetes, against bash-local and a bare client-go exec (target: at most +1 ms over the bare exec)")
	if os.Geteuid() != 0 {
		fmt.Printf("  skipped: the test exec server runs pods in new namespaces and needs root\n\n")
		return
	}
	kubeexec.Quiet() // the kubelet code's own logging of closed connections
	srv, err := kubetest.Start()
	check(err)
	defer srv.Close()
	_, err = srv.AddPod("dev", map[string]string{"app": "dev"})
	check(err)

	comp := func(name, executor, config string) string {
		f := filepath.Join(dir, name+".yaml")
		check(os.WriteFile(f, []byte(fmt.Sprintf(`plugins:
  - id: env
    path: %s
  - id: bash
    path: %s
%s
  - id: tools
    path: %s
`, filepath.Join(dir, "dsh-shell-env"), filepath.Join(dir, "dsh-"+executor), config, filepath.Join(dir, "dsh-tool-bash"))), 0o600))
		return f
	}
	kube := connect(exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error",
		comp("kube", "bash-kubernetes", fmt.Sprintf("    config:\n      kubeconfig: %s\n      pod: dev", srv.Kubeconfig))))
	defer kube.Close()
	local := connect(exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comp("kube-local", "bash-local", "")))
	defer local.Close()

	bare := newBareExec(srv)
	call := func(cs *mcp.ClientSession, command string) {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command, "description": "bench"}})
		check(err)
		if r.IsError {
			fail(fmt.Sprintf("bash %q: %v", command, r.Content))
		}
	}
	for i := 0; i < 5; i++ { // warm up
		call(kube, "true")
		call(local, "true")
		check(bare.run("true", io.Discard))
	}
	var tk, tl, tb []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		check(bare.run("true", io.Discard))
		tb = append(tb, time.Since(t))
		t = time.Now()
		call(kube, "true")
		tk = append(tk, time.Since(t))
		t = time.Now()
		call(local, "true")
		tl = append(tl, time.Since(t))
	}
	row("bash-kubernetes, bash tool", tk)
	row("bash-local, bash tool", tl)
	row("bare client-go exec of true", tb)
	fmt.Printf("  bash-kubernetes over the bare exec: %+.2f ms (median); over bash-local: %+.2f ms\n",
		ms(median(tk)-median(tb)), ms(median(tk)-median(tl)))

	const flood = 100 << 20
	cmd := fmt.Sprintf("head -c %d /dev/zero", flood)
	var fk, fb []time.Duration
	for i := 0; i < 3; i++ {
		t := time.Now()
		w := &countWriter{}
		check(bare.run(cmd, w))
		fb = append(fb, time.Since(t))
		if w.n != flood {
			fail(fmt.Sprintf("the bare exec's flood brought %d bytes, want %d", w.n, flood))
		}
		t = time.Now()
		call(kube, cmd)
		fk = append(fk, time.Since(t))
	}
	fmt.Printf("  100 MB of stdout: bash-kubernetes %.0f MB/s, bare exec %.0f MB/s (medians of 3)\n\n",
		flood/1e6/median(fk).Seconds(), flood/1e6/median(fb).Seconds())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// bareExec is an exec as kubectl makes it: the WebSocket executor with
// SPDY as the fallback, built once from the kubeconfig.
type bareExec struct {
	cfg *rest.Config
	cs  *kubernetes.Clientset
	ns  string
}

func newBareExec(s *kubetest.Server) *bareExec {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: s.Kubeconfig}, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	check(err)
	cs, err := kubernetes.NewForConfig(cfg)
	check(err)
	return &bareExec{cfg: cfg, cs: cs, ns: s.Namespace}
}

func (b *bareExec) run(command string, stdout io.Writer) error {
	opts := &corev1.PodExecOptions{Command: []string{"sh", "-c", command}, Stdout: true, Stderr: true}
	u := b.cs.CoreV1().RESTClient().Post().Namespace(b.ns).Resource("pods").Name("dev").
		SubResource("exec").VersionedParams(opts, scheme.ParameterCodec).URL()
	spdy, err := remotecommand.NewSPDYExecutor(b.cfg, "POST", u)
	if err != nil {
		return err
	}
	ws, err := remotecommand.NewWebSocketExecutor(b.cfg, "GET", u.String())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: io.Discard})
}
