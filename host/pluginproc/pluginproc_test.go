//go:build unix

package pluginproc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/sdk"
)

// The test binary doubles as a plugin (or a binary that never becomes
// one) when started with roleEnv set: the behaviours no real plugin has.
const (
	roleEnv    = "DSH_PLUGINPROC_TEST_ROLE"
	pidFileEnv = "DSH_PLUGINPROC_TEST_PIDFILE"
)

var binDir string

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		playRole(role)
		return
	}
	dir, err := os.MkdirTemp("", "dsh-pluginproc-test-")
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
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	if left := testplugins.Running(dir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "plugin processes left behind: %v\n", left)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// rolePlugin is the plugin the test binary plays.
type rolePlugin struct{ role string }

func (r rolePlugin) Describe() sdk.Description {
	d := sdk.Description{Name: "role-" + r.role, Version: "0.0.1"}
	if r.role == "env" {
		b, _ := json.Marshal(os.Environ())
		d.Summary = string(b)
	}
	return d
}

func (rolePlugin) Apply(context.Context, *sdk.Host, json.RawMessage) error { return nil }

// Dispose hangs in the hang-dispose role, as a plugin stuck in its
// clean-up would.
func (r rolePlugin) Dispose(ctx context.Context) error {
	if r.role == "hang-dispose" {
		select {}
	}
	return nil
}

func playRole(role string) {
	if f := os.Getenv(pidFileEnv); f != "" {
		pid := os.Getpid()
		if role == "hang-dispose" || role == "child" {
			// A child in the plugin's process group, which Stop must take too.
			child := exec.Command("sleep", "600")
			if err := child.Start(); err != nil {
				os.Exit(3)
			}
			pid = child.Process.Pid
		}
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o600); err != nil {
			os.Exit(3)
		}
	}
	switch role {
	case "automtls": // a plugin that does not take the hand-over
		os.Unsetenv(sdk.EnvTLSFD)
		sdk.Serve(rolePlugin{role})
	case "silent": // never speaks the handshake
		time.Sleep(time.Hour)
		os.Exit(0)
	default:
		sdk.Serve(rolePlugin{role})
	}
}

const wait = 30 * time.Second

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// roleConfig starts the test binary in role, with a pid file to learn
// which process it became.
func roleConfig(t *testing.T, role string) (Config, string) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	return Config{
		ID:     role,
		Binary: self(t),
		Env:    []string{"PATH=" + os.Getenv("PATH"), roleEnv + "=" + role, pidFileEnv + "=" + pidFile},
	}, pidFile
}

func readPid(t *testing.T, pidFile string) int {
	t.Helper()
	var pid int
	eventually(t, "the pid file is written", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || len(b) == 0 {
			return false
		}
		pid, err = strconv.Atoi(string(b))
		return err == nil
	})
	return pid
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", wait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// allStopped reports whether every thread of pid is in the stopped state.
func allStopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if err != nil || i < 0 || i+2 >= len(s) || s[i+2] != 'T' {
			return false
		}
	}
	return true
}

func gone(t *testing.T, pid int, what string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s (pid %d) is gone", what, pid), func() bool { return !alive(pid) })
}

func noneLeft(t *testing.T) {
	t.Helper()
	eventually(t, "no plugin process is left", func() bool { return len(testplugins.Running(binDir)) == 0 })
}

func bin(name string) string { return filepath.Join(binDir, "dsh-"+name) }

func start(t *testing.T, cfg Config) *Process {
	t.Helper()
	if cfg.Env == nil {
		cfg.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Binary, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = p.Stop(ctx)
	})
	return p
}

func exited(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(wait):
		t.Fatalf("Exited not closed for pid %d", p.Pid())
	}
}

func TestStartAndStop(t *testing.T) {
	p := start(t, Config{ID: "n", Binary: bin("noop")})
	if d := p.Description(); d.GetName() != "noop" || d.GetVersion() != "0.0.1" {
		t.Fatalf("description %v", d)
	}
	if p.Pid() <= 0 || !alive(p.Pid()) || p.Gone() || p.Binary() != bin("noop") || p.Conn() == nil || p.Broker() == nil {
		t.Fatalf("a started plugin: pid %d alive %v gone %v", p.Pid(), alive(p.Pid()), p.Gone())
	}
	select {
	case <-p.Exited():
		t.Fatal("Exited closed while the plugin runs")
	default:
	}
	// It answers.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if h, err := p.Lifecycle().Health(ctx); err != nil || !h.Ok {
		t.Fatalf("health: %v %v", h, err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	exited(t, p)
	gone(t, p.Pid(), "the stopped plugin")
	if !p.Gone() {
		t.Fatal("Gone is false after Stop")
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("a second stop: %v", err)
	}
}

func TestStartRefusals(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "dsh-text")
	if err := os.WriteFile(text, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	quits := filepath.Join(dir, "dsh-quits")
	if err := os.WriteFile(quits, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("another binary"))
	cases := []struct {
		name, binary, pin, want string
		is                      error
	}{
		{"missing binary", filepath.Join(dir, "dsh-missing"), "", "no such file", nil},
		{"not executable", text, "", "permission denied", nil},
		// go-plugin sees either the exit or the closed stdout first; both
		// are explained as not a plugin.
		{"exits at once", quits, "", "not a dsh plugin", nil},
		{"writes to stdout first", bin("chatty"), "", "not a dsh plugin, or it wrote to stdout before its handshake", nil},
		{"older protocol", bin("oldproto"), "", ") speaks dsh plugin protocol 0; this dsh speaks 1: rebuild the plugin against a current dsh sdk", nil},
		{"newer protocol", bin("newproto"), "", ") speaks dsh plugin protocol 2; this dsh speaks 1: upgrade dsh to a release that speaks protocol 2", nil},
		{"malformed pin", bin("noop"), "abc", `sha256 pin "abc" is not 64 hex digits`, nil},
		{"short pin", bin("noop"), "abcd", "not 64 hex digits", nil},
		{"checksum mismatch", bin("noop"), hex.EncodeToString(other[:]), "does not match its sha256 pin", ErrChecksum},
	}
	for _, c := range cases {
		p, err := Start(context.Background(), Config{ID: "e-" + c.name, Binary: c.binary, SHA256: c.pin, StartTimeout: wait})
		if err == nil {
			_ = p.Stop(context.Background())
			t.Errorf("%s: started", c.name)
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.ID != "e-"+c.name || pe.Binary != c.binary || pe.Op != "start" {
			t.Errorf("%s: %v is not an *Error naming the entry, binary and step", c.name, err)
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.Contains(msg, `plugin "e-`+c.name+`"`) || !strings.Contains(msg, c.binary) {
			t.Errorf("%s: %q, want it to contain %q, the entry and the binary", c.name, msg, c.want)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v is not %v", c.name, err, c.is)
		}
		noneLeft(t)
	}
}

func TestProtocolRefusal(t *testing.T) {
	for name, want := range map[string]int{"oldproto": sdk.ProtocolVersion - 1, "newproto": sdk.ProtocolVersion + 1} {
		_, err := Start(context.Background(), Config{ID: name, Binary: bin(name), StartTimeout: wait})
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Plugin != want || pe.Host != sdk.ProtocolVersion {
			t.Errorf("%s: %v, want a *ProtocolError naming %d and %d", name, err, want, sdk.ProtocolVersion)
		}
		noneLeft(t)
	}
}

// TestPluginVersion holds go-plugin's wording of a version refusal to
// account: the plugin's version is read from it.
func TestPluginVersion(t *testing.T) {
	for msg, want := range map[string]int{
		"incompatible API version with plugin. Plugin version: 2, Client versions: [1]":   2,
		"incompatible API version with plugin. Plugin version: 0, Client versions: [1]":   0,
		"incompatible API version with plugin. Plugin version: 17":                        17,
		"Incompatible API version with plugin. Plugin version: 3, Client versions: [1 2]": 3,
	} {
		if v, ok := pluginVersion(msg); !ok || v != want {
			t.Errorf("%q: %d %v, want %d", msg, v, ok, want)
		}
	}
	for _, msg := range []string{"incompatible API version with plugin", "Plugin version: x"} {
		if v, ok := pluginVersion(msg); ok {
			t.Errorf("%q: read %d", msg, v)
		}
	}
}

func TestChecksumPin(t *testing.T) {
	b, err := os.ReadFile(bin("noop"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	p := start(t, Config{ID: "pinned", Binary: bin("noop"), SHA256: hex.EncodeToString(sum[:])})
	if p.Description().GetName() != "noop" {
		t.Fatalf("pinned start: %v", p.Description())
	}

	// A mismatch is found before the exec: the binary never runs.
	cfg, pidFile := roleConfig(t, "silent")
	cfg.SHA256 = hex.EncodeToString(sum[:])
	_, err = Start(context.Background(), cfg)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("mismatch: %v", err)
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the binary ran despite its pin (pid file: %v)", err)
	}
}

func TestStartTimeout(t *testing.T) {
	cfg, pidFile := roleConfig(t, "silent")
	cfg.StartTimeout = time.Second
	_, err := Start(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "no handshake within the start timeout") {
		t.Fatalf("a binary that never handshakes: %v", err)
	}
	gone(t, readPid(t, pidFile), "the binary that never handshook")
}

// A start whose context ends fails with the context's error and leaves
// nothing running.
func TestStartCancelled(t *testing.T) {
	testStartCancelled(t, 2*time.Second)
}

// The cancellation should end the start at once, not at the end of the
// start timeout (the host cancels starts when it shuts down).
func TestStartCancelledBeforeTheStartTimeout(t *testing.T) {
	testStartCancelled(t, time.Hour)
}

func testStartCancelled(t *testing.T, startTimeout time.Duration) {
	cfg, pidFile := roleConfig(t, "silent")
	cfg.StartTimeout = startTimeout
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := Start(ctx, cfg)
		errc <- err
	}()
	pid := readPid(t, pidFile)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "start") {
			t.Fatalf("a cancelled start: %v", err)
		}
	case <-time.After(wait):
		t.Fatalf("a cancelled start did not return in %v (start timeout %v)", wait, startTimeout)
	}
	gone(t, pid, "the process of a cancelled start")
}

func TestPluginEnvironment(t *testing.T) {
	t.Setenv("DSH_PLUGINPROC_HOST_ONLY", "leaked")
	cfg, _ := roleConfig(t, "env")
	cfg.Env = append(cfg.Env, "GIVEN=yes")
	cfg.SocketDir = t.TempDir()
	p := start(t, cfg)
	var env []string
	if err := json.Unmarshal([]byte(p.Description().GetSummary()), &env); err != nil {
		t.Fatalf("summary %q: %v", p.Description().GetSummary(), err)
	}
	joined := "\n" + strings.Join(env, "\n") + "\n"
	if strings.Contains(joined, "DSH_PLUGINPROC_HOST_ONLY") {
		t.Fatal("the plugin inherited the host's environment")
	}
	if !strings.Contains(joined, "\nGIVEN=yes\n") || !strings.Contains(joined, "\nPLUGIN_UNIX_SOCKET_DIR="+cfg.SocketDir+"\n") {
		t.Fatalf("plugin environment %q lacks what it was given", env)
	}
	ents, err := os.ReadDir(cfg.SocketDir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("no socket in the socket dir: %v %v", ents, err)
	}
}

// apply sends Apply with a broker server for the plugin to dial, as the
// host does; Dispose reaches a plugin's own Dispose only once applied.
func apply(t *testing.T, p *Process) {
	t.Helper()
	id := p.Broker().NextId()
	go p.Broker().AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server { return grpc.NewServer(opts...) })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := p.Apply(ctx, &lifecycle.ApplyRequest{Id: "x", HostBrokerId: id}); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func TestStopEndsAPluginHungInDispose(t *testing.T) {
	cfg, pidFile := roleConfig(t, "hang-dispose")
	p := start(t, cfg)
	child := readPid(t, pidFile)
	apply(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	err := p.Stop(ctx)
	var pe *Error
	if !errors.As(err, &pe) || pe.Op != "dispose" || pe.ID != "hang-dispose" {
		t.Fatalf("stop of a plugin hung in Dispose: %v, want a dispose error", err)
	}
	exited(t, p)
	gone(t, p.Pid(), "the plugin hung in Dispose")
	gone(t, child, "the child in the plugin's group")
	if err2 := p.Stop(context.Background()); err2 != err {
		t.Fatalf("a second stop: %v, want the first one's %v", err2, err)
	}
}

// A plugin that exits cleanly on Stop can leave a child in its process
// group: Stop takes it too.
func TestStopTakesTheGroup(t *testing.T) {
	cfg, pidFile := roleConfig(t, "child")
	p := start(t, cfg)
	child := readPid(t, pidFile)
	apply(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	exited(t, p)
	gone(t, child, "the child left in the plugin's group")
}

func TestStopEndsAStoppedPlugin(t *testing.T) {
	p := start(t, Config{ID: "frozen", Binary: bin("noop")})
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The stop takes effect after kill returns: wait for every thread,
	// or one still running could answer Dispose.
	eventually(t, "every thread of the plugin is stopped", func() bool { return allStopped(p.Pid()) })
	// No deadline: Stop brings its own.
	err := p.Stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "dispose") {
		t.Fatalf("stop of a SIGSTOPped plugin: %v, want the dispose that timed out", err)
	}
	exited(t, p)
	gone(t, p.Pid(), "the SIGSTOPped plugin")
}

func TestKill(t *testing.T) {
	p := start(t, Config{ID: "k", Binary: bin("noop")})
	p.Kill()
	exited(t, p)
	if !p.Gone() {
		t.Fatal("Gone is false after Exited")
	}
	gone(t, p.Pid(), "the killed plugin")
	// Nothing is left to dispose: Stop says nothing went wrong.
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("stop after kill: %v", err)
	}
}

func TestGoneAndExitedWhenThePluginDies(t *testing.T) {
	p := start(t, Config{ID: "dies", Binary: bin("noop")})
	if p.Gone() {
		t.Fatal("Gone before the plugin died")
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Gone reports the dead plugin", p.Gone)
	exited(t, p)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("stop of a dead plugin: %v", err)
	}
}
