//go:build linux

package kubeexec

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// A connection lost under a command ends the relay with a sentence, in
// bounded time, and the command in the pod with it.
func TestKubernetesRelayConnectionLost(t *testing.T) {
	Quiet()
	srv := kubetest.New(t)
	srv.KeepExecsOnDisconnect(true) // the command's end is the relay's work
	if _, err := srv.AddPod("web", nil); err != nil {
		t.Fatal(err)
	}
	// The relay reaches the server through a proxy the test can cut.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "https://"))
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	kc, err := os.ReadFile(srv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, bytes.ReplaceAll(kc, []byte(srv.URL), []byte("https://"+ln.Addr().String())), 0o600); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(t.TempDir(), "started")
	j := Job{Target: Target{Kubeconfig: path, Context: "kubetest", Pod: "web"}, Pod: "web", Container: "main", ID: NewID(), GraceMs: 500,
		Command: "setsid sleep 4545 & touch " + mark + "; sleep 4545"}
	b, _ := json.Marshal(j)
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := Relay(bytes.NewReader(b), &out, &errOut)
		done <- result{errOut.String(), code}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
	}
	ln.Close()
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	select {
	case r := <-done:
		if r.code != ExitLost || r.errOut != "The connection to pod default/web was lost before the command's end was known.\n" {
			t.Fatalf("lost: %d %q", r.code, r.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not end once its connection was lost")
	}
	c := connect(t, srv, "web")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var out bytes.Buffer
		_, err := c.Exec(context.Background(), "web", "main", ExecOptions{Command: []string{"sh", "-c", `for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline; echo; done 2>/dev/null`}, Stdout: &out})
		if err == nil && !strings.Contains(out.String(), "sleep 4545") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left in the pod: %v %s", err, out.String())
		}
	}
}

// A kubeconfig gone since the executor read it is one sentence.
func TestKubernetesRelayKubeconfigGone(t *testing.T) {
	Quiet()
	path := filepath.Join(t.TempDir(), "kc")
	j := Job{Target: Target{Kubeconfig: path, Context: "kubetest", Pod: "web"}, Pod: "web", Container: "main", ID: NewID(), Command: "true"}
	b, _ := json.Marshal(j)
	var out, errOut bytes.Buffer
	code := Relay(bytes.NewReader(b), &out, &errOut)
	if code != ExitLost || errOut.String() != "The kubeconfig "+path+" does not exist.\n" {
		t.Fatalf("%d %q", code, errOut.String())
	}
	if err := os.WriteFile(path, []byte("not: [a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	code = Relay(bytes.NewReader(b), &out, &errOut)
	if got := errOut.String(); code != ExitLost || !strings.HasPrefix(got, "The kubeconfig "+path+" (context kubetest) cannot be used: ") || strings.Contains(got, "config: ") || strings.Count(got, "\n") != 1 {
		t.Fatalf("%d %q", code, got)
	}
}
