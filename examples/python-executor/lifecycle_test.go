//go:build linux

package pythonexecutor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
)

// compose writes a composition next to the built executor with the shell
// entry's extra lines (indented as its keys) and returns its path.
func compose(t *testing.T, dir, shellExtra string) string {
	t.Helper()
	comp := `host:
  startTimeout: 30s
plugins:
  - id: env
    name: shell-env
  - id: shell
    path: dsh-python-executor
` + shellExtra + `
  - id: tools
    name: tool-bash
`
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte(comp), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// validate runs dsh validate on comp and returns its exit code and stderr.
func validate(t *testing.T, comp string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "dsh"), "validate", comp)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

func sum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// A pin covers the whole executor: a change of executor.py, rebuilt, is
// refused before anything of it runs.
func TestPythonExecutorPin(t *testing.T) {
	testneeds.Python(t, "grpc", "google.protobuf", "cryptography")
	dir := filepath.Dir(build(t, "."))
	bin := filepath.Join(dir, "dsh-python-executor")
	pin := sum(t, bin)

	// The same sources build the same bytes: a pin survives a rebuild.
	again := filepath.Dir(build(t, "."))
	if got := sum(t, filepath.Join(again, "dsh-python-executor")); got != pin {
		t.Fatalf("two builds of the same sources differ: %s and %s", pin, got)
	}

	comp := compose(t, dir, "    sha256: "+pin)
	if code, out := validate(t, comp); code != 0 {
		t.Fatalf("pinned, as built: exit %d\n%s", code, out)
	}

	// The script changed by one line, built again in place.
	src := t.TempDir()
	if err := os.CopyFS(src, os.DirFS(".")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(src, "executor.py")
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, append(b, "\nCHANGED = True\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, filepath.Join(src, "build.py"), bin).CombinedOutput(); err != nil {
		t.Fatalf("build.py: %v\n%s", err, out)
	}
	code, out := validate(t, comp)
	if code == 0 || !strings.Contains(out, `c.yaml:6:5: plugin "shell" (`+bin+`): start: checksum mismatch: the binary does not match its sha256 pin`) {
		t.Fatalf("changed script under the old pin: exit %d\n%s", code, out)
	}
}

// Configs meet the schema Describe gives (checked by the host, each
// problem at its line) and Check (what Apply would refuse); an applied
// config is what the commands run with.
func TestPythonExecutorConfig(t *testing.T) {
	testneeds.Python(t, "grpc", "google.protobuf", "cryptography")
	dir := filepath.Dir(build(t, "."))

	comp := compose(t, dir, "    config:\n      timeoutMs: soon\n      bogus: 1")
	code, out := validate(t, comp)
	for _, want := range []string{
		`c.yaml:9:18: plugin "shell": config /timeoutMs: got string, want integer`,
		`c.yaml:10:7: plugin "shell": config: unknown key "bogus" (allowed: cwd, graceMs, maxOutputBytes, maxTimeoutMs, timeoutMs)`,
	} {
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("schema: exit %d, want %q in\n%s", code, want, out)
		}
	}

	comp = compose(t, dir, "    config:\n      timeoutMs: 5000\n      maxTimeoutMs: 1000")
	code, out = validate(t, comp)
	if code == 0 || !strings.Contains(out, "apply: config: timeoutMs 5000 is above maxTimeoutMs 1000") {
		t.Errorf("check: exit %d, want the executor's refusal in\n%s", code, out)
	}

	comp = compose(t, dir, "    config:\n      timeoutMs: 1500")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := serve(t, ctx, comp)
	got, _ := s.call(t, ctx, "bash", map[string]any{"command": "echo up; sleep 30"})
	if !strings.Contains(got, "up") || !strings.Contains(got, "timed out after 1500ms") {
		t.Fatalf("got %q, want the configured timeout of 1500ms", got)
	}
	got, isErr := s.call(t, ctx, "bash", map[string]any{"command": "echo next"})
	if isErr || got != "next" {
		t.Fatalf("after the timeout: %q (isError %v)", got, isErr)
	}
}

// The lifecycle a host drives, called one by one on the executor started
// as the host starts it: Describe, Health, Check, Release, Dispose (which
// ends the foreground commands), and the exit when the host is gone.
func TestPythonExecutorLifecycle(t *testing.T) {
	testneeds.Python(t, "grpc", "google.protobuf", "cryptography")
	bin := filepath.Join(filepath.Dir(build(t, ".")), "dsh-python-executor")

	// The host, as the executor sees it: a process whose end it watches.
	fakeHost := exec.Command("sleep", "300")
	if err := fakeHost.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fakeHost.Process.Kill(); _ = fakeHost.Wait() })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := pluginproc.Start(ctx, pluginproc.Config{
		ID: "shell", Binary: bin, StartTimeout: 30 * time.Second,
		Env:       []string{"PATH=" + os.Getenv("PATH"), "DSH_HOST_PID=" + strconv.Itoa(fakeHost.Process.Pid)},
		SocketDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })

	d := p.Description()
	if d.Name != "python-executor" || d.SettingsNamespace != "shell" || len(d.Provides) != 1 || d.Provides[0].Key != "shell" ||
		len(d.Provides[0].Methods) != 8 || len(d.Inject) != 1 || d.Inject[0].Key != "subprocess" || !strings.Contains(d.ConfigSchema, `"graceMs"`) {
		t.Fatalf("description: %+v", d)
	}
	if h, err := p.Lifecycle().Health(ctx); err != nil || !h.Ok {
		t.Fatalf("health: %v %v", h, err)
	}
	if err := p.Check(ctx, &lifecycle.CheckRequest{Id: "shell", ConfigJson: []byte(`{"timeoutMs": 2000}`)}); err != nil {
		t.Fatalf("check of a good config: %v", err)
	}
	if err := p.Check(ctx, &lifecycle.CheckRequest{Id: "shell", ConfigJson: []byte(`[1]`)}); err == nil || !strings.Contains(err.Error(), "config: not an object") {
		t.Fatalf("check of a list: %v", err)
	}
	if err := p.Lifecycle().Release(ctx, "tools"); err != nil {
		t.Fatalf("release: %v", err)
	}

	// A foreground command, then Dispose: the command's tree ends and the
	// call returns with the signal.
	shell := shellv1.NewShellClient(p.Conn())
	pidFile := filepath.Join(t.TempDir(), "pid")
	spec, err := shell.Resolve(ctx, &shellv1.ExecRequest{Command: "echo $$ > " + pidFile + "; sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan *shellv1.RunResult, 1)
	go func() {
		r, err := shell.Run(ctx, spec)
		if err != nil {
			t.Errorf("run: %v", err)
		}
		ran <- r
	}()
	var cmdPid int
	for deadline := time.Now().Add(20 * time.Second); cmdPid == 0; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			cmdPid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	if err := p.Lifecycle().Dispose(ctx); err != nil {
		t.Fatalf("dispose: %v", err)
	}
	select {
	case r := <-ran:
		if r == nil || r.Signal == "" {
			t.Fatalf("run after dispose: %+v, want ended by a signal", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the command's call did not return after dispose")
	}
	for deadline := time.Now().Add(10 * time.Second); !gone(cmdPid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(cmdPid, syscall.SIGKILL)
			t.Fatalf("the command %d still runs after dispose", cmdPid)
		}
	}

	// The host goes: the executor follows within its watch's period.
	_ = fakeHost.Process.Kill()
	_ = fakeHost.Wait()
	select {
	case <-p.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("the executor still runs 15s after its host is gone")
	}
}
