package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/internal/testplugins/probev1"
	"github.com/dshrun/dsh/plugins/shellenv"
	"github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
	"github.com/dshrun/dsh/registry"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dsh-host-test-")
	if err != nil {
		panic(err)
	}
	if err := testplugins.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction(procs.SpawnerGoroutine)); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	if left := testplugins.Running(dir); len(left) > 0 {
		for _, pid := range left {
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
			fmt.Fprintf(os.Stderr, "plugin process left behind: pid %d %s\n", pid, exe)
		}
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// writeComp writes a composition file and loads it.
func writeComp(t *testing.T, yaml string) *composition.Composition {
	t.Helper()
	file := filepath.Join(t.TempDir(), "comp.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := composition.Load(file, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("load composition: %v", err)
	}
	return c
}

// startHost starts comp with the test options and closes it when the test
// ends.
func startHost(t *testing.T, comp *composition.Composition) *Host {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, comp, testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

func testOptions(t *testing.T, observe func(registry.Event)) Options {
	t.Cleanup(func() {
		// Every host a test started is closed by now: nothing may be left.
		deadline := time.Now().Add(3 * time.Second)
		for len(testplugins.Running(binDir)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if left := testplugins.Running(binDir); len(left) > 0 {
			for _, pid := range left {
				exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
				t.Errorf("plugin process left behind: pid %d %s", pid, exe)
			}
		}
	})
	return Options{
		PluginPath:  []string{binDir},
		RuntimeBase: t.TempDir(),
		Logger:      hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}}),
		LookupEnv: func(k string) (string, bool) {
			if k == "DSH_HOME" {
				return "/srv/dsh-home", true
			}
			return os.LookupEnv(k)
		},
		Observe: observe,
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func assertNoPlugins(t *testing.T) {
	t.Helper()
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("plugin processes still alive: %v", left)
	}
}

const pairYAML = `
plugins:
  - id: probe
    name: probe
    config:
      fact: from-probe
  - id: env
    name: shell-env
    config:
      facts:
        DSH_COMPOSITION: pair
`

// The consumer runs in its own process and reaches the provider, in another
// process, only through the host; teardown disposes the consumer first.
func TestConsumerCallsProviderThroughHost(t *testing.T) {
	var mu sync.Mutex
	var events []string
	observe := func(ev registry.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, fmt.Sprintf("%s:%s", ev.Scope, ev.To))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, pairYAML), testOptions(t, observe))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())

	probe := probev1.NewProbeClient(h.Conn("probe"))
	resp, err := probe.Collect(ctx, &probev1.CollectRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"DSH_HOME": "/srv/dsh-home", "DSH_PROBE": "from-probe", "DSH_COMPOSITION": "pair"}
	for k, v := range want {
		if resp.Env[k] != v {
			t.Errorf("snapshot %s = %q, want %q (snapshot %v)", k, resp.Env[k], v, resp.Env)
		}
	}
	facts, err := shellenv.NewClient(h.Conn(shellenv.Key)).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, f := range facts {
		owners[f.Name] = f.Owner
	}
	if owners["DSH_PROBE"] != "probe" || owners["DSH_HOME"] != shellenv.OwnerBuiltin || owners["DSH_COMPOSITION"] != shellenv.OwnerConfig {
		t.Errorf("owners = %v", owners)
	}

	st := h.Status()
	if len(st) != 2 || st[0].State != "active" || st[1].State != "active" || st[0].Pid == 0 {
		t.Fatalf("status = %+v", st)
	}

	if err := h.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	mu.Lock()
	seq := strings.Join(events, " ")
	mu.Unlock()
	pd, ed := strings.Index(seq, "probe:disposed"), strings.Index(seq, "env:disposed")
	if pd < 0 || ed < 0 || pd > ed {
		t.Fatalf("teardown order wrong, want probe disposed before env: %s", seq)
	}
	// The consumer loaded only after its provider was active.
	if strings.Index(seq, "probe:loading") < strings.Index(seq, "env:active") {
		t.Fatalf("probe loaded before env was active: %s", seq)
	}
	assertNoPlugins(t)
	if _, err := os.Stat(h.rt.dir); !os.IsNotExist(err) {
		t.Fatalf("runtime directory %s left behind", h.rt.dir)
	}
}

// A consumer's registrations are effects of its scope: disposing it makes
// the provider drop them.
func TestConsumerFactsDisposedWithIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, pairYAML), testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	env := shellenv.NewClient(h.Conn(shellenv.Key))
	snap, err := env.Collect(ctx)
	if err != nil || snap.Env["DSH_PROBE"] != "from-probe" {
		t.Fatalf("before: %v %v", snap.Env, err)
	}
	s, _ := h.Registry().Scope("probe")
	if err := s.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err = env.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Env["DSH_PROBE"]; ok {
		t.Fatalf("DSH_PROBE survived its owner: %v", snap.Env)
	}
}

// fakeCaller is a plugin identity for driving a host server directly.
type fakeCaller struct {
	id   string
	keys []string
}

func (f fakeCaller) callerID() string    { return f.id }
func (f fakeCaller) callerLabel() string { return fmt.Sprintf("%q (test)", f.id) }
func (f fakeCaller) touch(string)        {}
func (f fakeCaller) addEffect(string, func(context.Context) error) error {
	return nil
}
func (f fakeCaller) self() *load { return nil }
func (f fakeCaller) declares(key string) bool {
	for _, k := range f.keys {
		if k == key {
			return true
		}
	}
	return false
}

// The capability check holds for any gRPC client, not just the SDK: a raw
// client on a plugin's host server asking for an undeclared key is refused.
func TestCapabilityCheckRawClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, pairYAML), testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())

	dial := func(c caller) *grpc.ClientConn {
		lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "host.sock"))
		if err != nil {
			t.Fatal(err)
		}
		srv := h.newHostServer(c)
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		conn, err := grpc.NewClient("unix:"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	stranger := dial(fakeCaller{id: "stranger", keys: []string{"probe"}})
	_, err = shellenvv1.NewShellEnvClient(stranger).Collect(ctx, &shellenvv1.CollectRequest{})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `did not declare inject "shellEnv"`) {
		t.Fatalf("undeclared key: got %v, want PermissionDenied naming the key", err)
	}
	_, err = pluginv1.NewHostClient(stranger).Lookup(ctx, &pluginv1.LookupRequest{Key: "shellEnv"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("lookup of undeclared key: got %v", err)
	}
	// The same call from a plugin that declared the key goes through, and
	// the provider sees the host-assigned caller, not a forged one.
	friend := dial(fakeCaller{id: "friend", keys: []string{"shellEnv", "ghost"}})
	if _, err := shellenvv1.NewShellEnvClient(friend).Collect(ctx, &shellenvv1.CollectRequest{}); err != nil {
		t.Fatalf("declared key: %v", err)
	}
	lk, err := pluginv1.NewHostClient(friend).Lookup(ctx, &pluginv1.LookupRequest{Key: "shellEnv"})
	if err != nil || !lk.Provided || lk.Provider != "env" || !slices.Contains(lk.GrpcServices, "dsh.shellenv.v1.ShellEnv") {
		t.Fatalf("lookup: %v %v", lk, err)
	}
	lk, err = pluginv1.NewHostClient(friend).Lookup(ctx, &pluginv1.LookupRequest{Key: "ghost"})
	if err != nil || lk.Provided {
		t.Fatalf("lookup of unprovided key: %v %v", lk, err)
	}
}

// Every bad input fails the whole load with the file, line and entry, and
// leaves no plugin process behind.
func TestBadCompositions(t *testing.T) {
	notPlugin := filepath.Join(t.TempDir(), "dsh-notaplugin")
	if err := os.WriteFile(notPlugin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "silent.pid")
	silent := filepath.Join(t.TempDir(), "dsh-silent")
	if err := os.WriteFile(silent, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"no handshake", `
host:
  startTimeout: 500ms
plugins:
  - id: silent
    path: ` + silent + `
`, []string{":5:", `plugin "silent"`, "no handshake within the start timeout"}},
		{"duplicate provider", `
plugins:
  - id: env
    name: shell-env
  - id: env2
    name: shell-env
`, []string{":5:", `plugin "env2"`, `service "shellEnv" is already provided by plugin "env"`}},
		{"inject nobody provides", `
plugins:
  - id: probe
    name: probe
`, []string{":3:", `plugin "probe"`, `injects "shellEnv", which no plugin of the composition provides`}},
		{"disabled provider", `
plugins:
  - id: env
    name: shell-env
    disabled: true
  - id: probe
    name: probe
`, []string{":6:", `only the disabled plugin "env"`}},
		{"cycle", `
plugins:
  - id: cyc-a-b
    name: probe
  - id: cyc-b-a
    name: probe
`, []string{"dependency cycle", `"cyc-a-b" (line 3)`, `"cyc-b-a" (line 5)`}},
		{"unknown plugin", `
plugins:
  - id: x
    name: nosuch
`, []string{":3:", "dsh-nosuch"}},
		{"not a plugin", `
plugins:
  - id: x
    path: ` + notPlugin + `
`, []string{":3:", `plugin "x"`, "not a dsh plugin"}},
		{"stdout before handshake", `
plugins:
  - id: chatty
    name: chatty
`, []string{":3:", `plugin "chatty"`, "wrote to stdout before its handshake"}},
		{"checksum mismatch", `
plugins:
  - id: noop
    path: ` + filepath.Join(binDir, "dsh-noop") + `
    sha256: "0000000000000000000000000000000000000000000000000000000000000000"
`, []string{":3:", `plugin "noop"`, "checksum mismatch"}},
		{"apply fails", `
plugins:
  - id: env
    name: shell-env
  - id: probe
    name: probe
    config: {failApply: true}
`, []string{":5:", `plugin "probe"`, "probe refuses to apply"}},
		{"config fails schema", `
plugins:
  - id: env
    name: shell-env
    config:
      facts: {lowercase: x}
`, []string{":6:15:", `plugin "env"`, "config /facts: 'lowercase' does not match"}},
		{"old protocol", `
plugins:
  - id: old
    name: oldproto
`, []string{":3:", `plugin "old" (`, "dsh-oldproto) speaks dsh plugin protocol 0; this dsh speaks 1: rebuild the plugin"}},
		{"new protocol", `
plugins:
  - id: new
    name: newproto
`, []string{":3:", `plugin "new" (`, "dsh-newproto) speaks dsh plugin protocol 2; this dsh speaks 1: upgrade dsh"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			comp := writeComp(t, tc.yaml)
			h, err := Start(ctx, comp, testOptions(t, nil))
			if err == nil {
				h.Close(ctx)
				t.Fatal("Start succeeded")
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error %T is not a *LoadError: %v", err, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, comp.File) && !strings.Contains(msg, filepath.Base(comp.File)) {
				t.Errorf("error does not name the file: %s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			assertNoPlugins(t)
			if b, err := os.ReadFile(pidFile); err == nil {
				var pid int
				fmt.Sscan(string(b), &pid)
				if pid > 0 && testplugins.Alive(pid) {
					t.Fatalf("the silent plugin (pid %d) is still running", pid)
				}
			}
			// validate agrees with serve.
			if _, err := Validate(ctx, comp, testOptions(t, nil)); err == nil && tc.name != "apply fails" {
				t.Errorf("Validate accepted it")
			}
			assertNoPlugins(t)
		})
	}
}
