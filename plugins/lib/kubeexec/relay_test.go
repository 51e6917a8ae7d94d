//go:build linux

package kubeexec

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/kubetest"
)

// The relay hands the command its directory, environment and input, and
// exits with its exit code.
func TestKubernetesRelay(t *testing.T) {
	Quiet()
	srv := kubetest.New(t)
	if _, err := srv.AddPod("web", nil); err != nil {
		t.Fatal(err)
	}
	c := connect(t, srv, "web")
	run := func(j Job) (string, string, int) {
		j.Target, j.Pod, j.Container, j.ID, j.GraceMs = c.Target, "web", "main", NewID(), 500
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := Relay(bytes.NewReader(b), &out, &errOut)
		return out.String(), errOut.String(), code
	}
	out, errOut, code := run(Job{Dir: "/usr", Command: `pwd; echo "$A"; wc -c; echo e >&2; exit 5`, Env: map[string]string{"A": "it's $a"}, Stdin: bytes.Repeat([]byte("x"), 300000)})
	if out != "/usr\nit's $a\n300000\n" || errOut != "e\n" || code != 5 {
		t.Fatalf("relay: %q %q %d", out, errOut, code)
	}
	start := time.Now()
	const n = 10
	for i := 0; i < n; i++ {
		if _, _, code := run(Job{Command: "true"}); code != 0 {
			t.Fatalf("true: %d", code)
		}
	}
	t.Logf("one true through the relay: %v", time.Since(start)/n)
	start = time.Now()
	for i := 0; i < n; i++ {
		if code, err := c.Exec(context.Background(), "web", "main", ExecOptions{Command: []string{"true"}, Stdout: io.Discard}); code != 0 || err != nil {
			t.Fatalf("true: %d %v", code, err)
		}
	}
	t.Logf("one exec of true: %v", time.Since(start)/n)
}
