//go:build linux

// Package kubetest owns a Kubernetes API server's pods and pods/exec paths for
// tests, with the kubelet's own streaming server (k8s.io/cri-streaming) behind
// the exec route and a runtime that runs each pod as a set of fresh Linux
// namespaces on this machine.
//
// A pod is a holder process in new PID, mount, network and UTS namespaces; an
// exec enters those namespaces and runs the command there. The pod's
// filesystem is this machine's (only /proc is the pod's own), and the server
// must run as root. Clients reach it the way kubectl does: a kubeconfig with a
// bearer token over TLS, and the real exec protocols on the wire.
package kubetest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/cri-streaming/pkg/streaming"
)

// User is the name the server gives the bearer-token user in its messages.
const User = "dsh-test"

// Server is a running test API server with its pods.
type Server struct {
	URL        string // https://127.0.0.1:PORT
	Kubeconfig string // path of a kubeconfig file whose current context "kubetest" reaches this server
	Namespace  string // "default", the only namespace with pods

	// Token is the bearer token the server accepts.
	Token string

	dir        string // holds the kubeconfig
	api        *http.Server
	apiLn      net.Listener
	stream     streaming.Server
	streamURL  *url.URL
	stopStream func() error
	lingerers  []*lingerListener // both servers' listeners; see lingerListener
	calls      calls
	holders    *holderThread
	served     sync.WaitGroup

	mu        sync.Mutex
	pods      map[string]*pod
	forbidden map[string]bool
	closed    bool
	execs     sync.WaitGroup
	keepExecs atomic.Bool
	hang      atomic.Bool
}

// Start starts a server with no pods. Close stops it.
func Start() (*Server, error) {
	s := &Server{
		Namespace: "default",
		pods:      map[string]*pod{},
		forbidden: map[string]bool{},
	}
	if err := s.start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// New starts a server for one test and closes it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() {
		if stuck := s.close(); stuck != "" {
			t.Errorf("kubetest: %s still running 10s into Close", stuck)
		}
	})
	return s
}

func (s *Server) start() error {
	s.holders = newHolderThread()
	s.Token = randomHex(16)
	var err error
	if s.dir, err = os.MkdirTemp("", "kubetest-"); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}

	// The kubelet side: a plain HTTP streaming server on loopback, reached
	// only through the API server's proxy, as in a cluster.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("kubetest: listen for the streaming server: %w", err)
	}
	streamLn := newLingerListener(ln)
	s.lingerers = append(s.lingerers, streamLn)
	s.streamURL = &url.URL{Scheme: "http", Host: streamLn.Addr().String(), Path: "/"}
	cfg := streaming.DefaultConfig
	cfg.Addr = streamLn.Addr().String()
	cfg.BaseURL = s.streamURL
	cfg.StreamIdleTimeout = 30 * time.Minute
	if s.stream, err = streaming.NewServer(cfg, &podRuntime{s: s}); err != nil {
		_ = streamLn.Close()
		return fmt.Errorf("kubetest: streaming server: %w", err)
	}
	streamSrv := &http.Server{Handler: s.streamHandler(), ReadHeaderTimeout: 10 * time.Second}
	s.served.Add(1)
	go func() {
		defer s.served.Done()
		_ = streamSrv.Serve(streamLn)
	}()
	s.stopStream = streamSrv.Close

	ca, serverTLS, err := newCerts()
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return fmt.Errorf("kubetest: listen for the API server: %w", err)
	}
	apiLn := newLingerListener(ln)
	s.lingerers = append(s.lingerers, apiLn)
	s.apiLn = apiLn
	s.URL = "https://" + s.apiLn.Addr().String()
	s.api = &http.Server{Handler: s.routes(), TLSConfig: serverTLS, ReadHeaderTimeout: 10 * time.Second}
	s.served.Add(1)
	go func() {
		defer s.served.Done()
		_ = s.api.ServeTLS(s.apiLn, "", "")
	}()

	if s.Kubeconfig, err = writeKubeconfig(s.dir, s.URL, ca, s.Token, s.Namespace); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	return nil
}

// Close kills every pod, ends the exec calls in flight and stops both
// servers. Every pod's processes are gone when it returns.
func (s *Server) Close() { s.close() }

// close is Close, saying what it gave up waiting for ("" for nothing).
func (s *Server) close() (stuck string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ""
	}
	s.closed = true
	pods := s.pods
	s.pods = map[string]*pod{}
	s.mu.Unlock()

	for _, p := range pods {
		p.kill()
	}
	if s.holders != nil {
		s.holders.close()
	}
	if !waitBounded(&s.execs, 10*time.Second) {
		stuck = "exec calls"
	}
	if s.api != nil {
		_ = s.api.Close()
	}
	if s.stopStream != nil {
		_ = s.stopStream()
	}
	if !waitBounded(&s.served, 10*time.Second) && stuck == "" {
		stuck = "the servers"
	}
	for _, l := range s.lingerers {
		l.stop()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	return stuck
}

// waitBounded waits for wg, at most d (a stuck peer must not hang Close),
// and reports whether it was done.
func waitBounded(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Pod is a pod started by AddPod.
type Pod struct {
	Name string
	Pid  int // the pod's namespace holder on this machine (PID 1 inside the pod)
}

// AddPod starts a pod in the server's namespace. containers defaults to
// ["main"]; all containers of a pod share its namespaces.
func (s *Server) AddPod(name string, labels map[string]string, containers ...string) (*Pod, error) {
	if name == "" {
		return nil, errors.New("kubetest: a pod needs a name")
	}
	if len(containers) == 0 {
		containers = []string{"main"}
	}
	s.mu.Lock()
	_, exists := s.pods[name]
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("kubetest: pod %q: the server is closed", name)
	}
	if exists {
		return nil, fmt.Errorf("kubetest: pod %q already exists", name)
	}
	p, err := startPod(name, s.holders.start)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	p.labels = map[string]string{}
	for k, v := range labels {
		p.labels[k] = v
	}
	p.containers = append([]string(nil), containers...)
	p.created = time.Now().UTC().Truncate(time.Second)
	p.uid = randomUID()

	s.mu.Lock()
	if s.closed || s.pods[name] != nil {
		s.mu.Unlock()
		p.kill()
		return nil, fmt.Errorf("kubetest: pod %q: already exists or the server closed", name)
	}
	s.pods[name] = p
	s.mu.Unlock()
	return &Pod{Name: name, Pid: p.pid}, nil
}

// DeletePod kills every process of the pod; exec calls in flight end with an
// error. Afterwards the API answers that the pod is not found.
func (s *Server) DeletePod(name string) error {
	s.mu.Lock()
	p := s.pods[name]
	delete(s.pods, name)
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("kubetest: pod %q not found", name)
	}
	p.kill()
	return nil
}

// KeepExecsOnDisconnect(true) makes an exec whose client goes away leave
// its processes running, as containerd and CRI-O do: only its stdin closes
// (and its output, so a write fails). By default the test server kills
// them. Tests of a client's own clean-up turn it on, so that clean-up is
// what they see work.
func (s *Server) KeepExecsOnDisconnect(keep bool) { s.keepExecs.Store(keep) }

// Hang(true) makes the API server answer nothing, as a stopped one: each
// request waits until Hang(false) or until its client gives up. Exec calls
// already running go on.
func (s *Server) Hang(hang bool) { s.hang.Store(hang) }

// Forbid makes later requests on resource ("pods", "pods/exec") answer 403
// with a Kubernetes Status body, as when RBAC denies them.
func (s *Server) Forbid(resource string) {
	s.mu.Lock()
	s.forbidden[resource] = true
	s.mu.Unlock()
}

func (s *Server) isForbidden(resource string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forbidden[resource]
}

// lookup returns the pod named name, or nil.
func (s *Server) lookup(name string) *pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[name]
}

// list returns the pods, sorted by name.
func (s *Server) list() []*pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*pod, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// beginExec registers an exec in pod name so Close waits for it.
func (s *Server) beginExec(name string) (*pod, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pods[name]
	if p == nil || s.closed {
		return nil, nil, fmt.Errorf("pod %q not found", name)
	}
	s.execs.Add(1)
	return p, s.execs.Done, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randomUID() string {
	h := randomHex(16)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
