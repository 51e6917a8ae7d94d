//go:build linux

package kubeexec

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dshrun/dsh/internal/kubetest"
)

func connect(t *testing.T, srv *kubetest.Server, pod string) *Conn {
	t.Helper()
	c, err := Connect(Target{Kubeconfig: srv.Kubeconfig, Context: "kubetest", Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Exec gives the command's exit code and output; each API server error
// reads as one sentence.
func TestKubernetesExecAndErrors(t *testing.T) {
	Quiet()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := kubetest.New(t)
	if _, err := srv.AddPod("web", map[string]string{"app": "web"}, "main", "side"); err != nil {
		t.Fatal(err)
	}
	c := connect(t, srv, "web")
	pod, container, err := c.Pick(ctx)
	if err != nil || pod.Name != "web" || container != "main" {
		t.Fatalf("pick: %v %v %q", pod, err, container)
	}
	var out, errOut bytes.Buffer
	code, err := c.Exec(ctx, "web", "main", ExecOptions{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 4"}, Stdout: &out, Stderr: &errOut})
	if code != 4 || err != nil || out.String() != "out\n" || errOut.String() != "err\n" {
		t.Fatalf("exec: %d %v %q %q", code, err, out.String(), errOut.String())
	}

	sel, err := Connect(Target{Kubeconfig: srv.Kubeconfig, Context: "kubetest", LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if pod, _, err := sel.Pick(ctx); err != nil || pod.Name != "web" {
		t.Fatalf("pick by selector: %v %v", pod, err)
	}
	sel.Target.LabelSelector = "app=none"
	if _, _, err := sel.Pick(ctx); err == nil || err.Error() != "No running pod in namespace default matches the label selector app=none (0 matched)." {
		t.Fatalf("no pod matches: %v", err)
	}

	for _, tc := range []struct {
		name, pod, container string
		forbid               string
		want                 string
	}{
		{"no pod", "nope", "main", "", "There is no pod nope in namespace default."},
		{"no container", "web", "nope", "", "The pod default/web has no container nope, or it is not running."},
		{"forbidden", "web", "main", "pods/exec", "Kubernetes does not allow this account to run commands in pod default/web: it needs permission to create pods/exec in namespace default."},
	} {
		if tc.forbid != "" {
			srv.Forbid(tc.forbid)
		}
		_, err := c.Exec(ctx, tc.pod, tc.container, ExecOptions{Command: []string{"true"}, Stdout: &out})
		if got := c.Explain(err, tc.pod, tc.container); got == nil || got.Error() != tc.want {
			t.Errorf("%s: %v (from %T %v)", tc.name, got, err, err)
		}
	}
	down := kubetest.New(t)
	dc := connect(t, down, "web")
	down.Close()
	if _, _, err := dc.Pick(ctx); err == nil || err.Error() != "The Kubernetes API server at "+down.URL+" refuses connections: the cluster may be down." {
		t.Errorf("pick on a server that is down: %v", err)
	}
	if _, _, err := connect(t, srv, "nope").Pick(ctx); err == nil || err.Error() != "There is no pod nope in namespace default." {
		t.Errorf("pick of no pod: %v", err)
	}
	c.Target.Container = "nope"
	if _, _, err := c.Pick(ctx); err == nil || !strings.Contains(err.Error(), "has no container nope") {
		t.Errorf("pick of no container: %v", err)
	}
}

// A refusal this package has no sentence of its own for reads as the
// server's words, without the runtime's call names.
func TestKubernetesRefusalInPlainWords(t *testing.T) {
	Quiet()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := kubetest.New(t)
	if _, err := srv.AddPod("web", nil); err != nil {
		t.Fatal(err)
	}
	c := connect(t, srv, "web")
	_, err := c.Exec(ctx, "web", "main", ExecOptions{Command: []string{"true"}})
	want := "Kubernetes refused the command in pod default/web: one of stdin, stdout, or stderr must be set."
	if got := c.Explain(err, "web", "main"); got == nil || got.Error() != want {
		t.Fatalf("got %v (from %v)", got, err)
	}
}

// An image without sh reads as such, in the words of the test server and
// of containerd.
func TestKubernetesNoShell(t *testing.T) {
	c := &Conn{Target: Target{Pod: "web"}, Namespace: "default", Config: &rest.Config{Host: "https://k8s:6443"}}
	want := "The container main of pod default/web has no sh on its PATH, and commands there run through sh (an image without a shell cannot run them)."
	for _, text := range []string{
		`Internal error occurred: error executing command in container: exec: "sh": executable file not found in $PATH`,
		`Internal error occurred: error executing command in container: failed to exec in container: failed to start exec "0f3c": OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown`,
	} {
		if got := c.Explain(errors.New(text), "web", "main"); got == nil || got.Error() != want {
			t.Errorf("%s: %v", text, got)
		}
	}
}
