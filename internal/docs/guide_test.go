package docs

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goProgram is the Go program of page whose text holds marker.
func goProgram(t *testing.T, page, marker string) []byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(moduleRoot(t), page))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range goBlock.FindAllSubmatch(text, -1) {
		if bytes.Contains(b[1], []byte("package main\n")) && bytes.Contains(b[1], []byte(marker)) {
			return b[1]
		}
	}
	t.Fatalf("%s shows no Go program with %q", page, marker)
	return nil
}

// build compiles pkg of the module (or, with src, the program src laid over
// it) into out.
func build(t *testing.T, out, pkg string, src []byte) {
	t.Helper()
	args := []string{"build", "-o", out}
	if src != nil {
		tmp := t.TempDir()
		main := filepath.Join(tmp, "main.go")
		if err := os.WriteFile(main, src, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(moduleRoot(t), filepath.FromSlash(pkg))
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(dir, "main.go"): main}})
		ov := filepath.Join(tmp, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-overlay", ov)
	}
	cmd := exec.Command("go", append(args, "./"+pkg)...)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// The guide's tool plugin runs: dsh call on a composition that names it by
// path gets its greeting, and a config its schema refuses stops the call.
func TestGuideToolRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dsh and a plugin")
	}
	dir := t.TempDir()
	build(t, filepath.Join(dir, "dsh"), "host/cmd/dsh", nil)
	build(t, filepath.Join(dir, "dsh_watchdog"), "host/cmd/dsh_watchdog", nil)
	build(t, filepath.Join(dir, "dsh-greet"), "internal/docs/example", goProgram(t, "docs/plugins.md", "sdk.Serve(&greet{})"))

	call := func(greeting string) (string, string, error) {
		comp := filepath.Join(dir, "greet.yaml")
		yaml := "plugins:\n  - path: ./dsh-greet\n    config: {greeting: " + greeting + "}\n"
		if err := os.WriteFile(comp, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(dir, "dsh"), "call", comp, "greet", `{"name":"Ada"}`)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}
	out, errOut, err := call("hi")
	if err != nil || strings.TrimSpace(out) != "hi, Ada" {
		t.Fatalf("dsh call greet: %v, stdout %q, stderr:\n%s", err, out, errOut)
	}
	out, errOut, err = call(`"Hi!"`)
	if err == nil || !strings.Contains(errOut, "config /greeting: 'Hi!' does not match pattern") {
		t.Fatalf("a greeting the pattern refuses: %v, stdout %q, stderr:\n%s", err, out, errOut)
	}
}

// The guide's consumer runs: its tool lists the facts of ctx.shellEnv,
// which shell-env provides, DSH_HOME among them.
func TestGuideConsumerRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dsh and two plugins")
	}
	dir := t.TempDir()
	build(t, filepath.Join(dir, "dsh"), "host/cmd/dsh", nil)
	build(t, filepath.Join(dir, "dsh_watchdog"), "host/cmd/dsh_watchdog", nil)
	build(t, filepath.Join(dir, "dsh-shell-env"), "plugins/shell-env", nil)
	build(t, filepath.Join(dir, "dsh-facts"), "internal/docs/example", goProgram(t, "docs/plugins.md", "sdk.Serve(&facts{})"))
	comp := filepath.Join(dir, "facts.yaml")
	yaml := "plugins:\n  - name: shell-env\n    config: {facts: {DSH_GUIDE: seen}}\n  - path: ./dsh-facts\n"
	if err := os.WriteFile(comp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "dsh"), "call", comp, "facts", `{}`)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir(), "DSH_HOME="+dir)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil || !strings.Contains(o.String(), "DSH_GUIDE=seen\n") || !strings.Contains(o.String(), "DSH_HOME="+dir+"\n") {
		t.Fatalf("dsh call facts: %v, stdout %q, stderr:\n%s", err, o.String(), e.String())
	}
}
