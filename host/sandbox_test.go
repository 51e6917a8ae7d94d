//go:build unix

package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
)

// ctx.sandboxPolicy serves the composition's sandbox section; a plugin
// may not provide the key; an edit that changes the section reloads the
// plugins that inject it, and one that leaves it alone does not.
func TestSandboxPolicy(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "comp.yaml")
	yaml := func(mode string) string {
		return "sandbox:\n  defaultMode: " + mode + "\n  workspaceRoot: ws\nplugins:\n  - id: policy-user\n    name: probe\n  - id: env\n    name: shell-env\n"
	}
	h := startFile(t, file, yaml("workspace-write"))
	ctx := context.Background()
	p, err := h.sandbox.Get(ctx)
	real, _ := filepath.EvalSymlinks(ws)
	if err != nil || p.DefaultMode != sandbox.WorkspaceWrite || p.WorkspaceRoot != real || p.Network {
		t.Fatalf("policy: %v %v", p, err)
	}
	userPid, envPid := pidOf(h, "policy-user"), pidOf(h, "env")

	// The same section, another plugin's change: the injector stays.
	if err := applyFile(t, h, file, yaml("workspace-write")+"    config: {facts: {DSH_X: y}}\n"); err != nil {
		t.Fatal(err)
	}
	if pidOf(h, "env") == envPid {
		t.Fatal("the edit of env's config did not reload it")
	}
	envPid = pidOf(h, "env")
	if pidOf(h, "policy-user") != userPid {
		t.Fatal("an edit that left the sandbox section alone reloaded its injector")
	}
	// Another mode: the injector reloads, the others stay.
	if err := applyFile(t, h, file, yaml("read-only")+"    config: {facts: {DSH_X: y}}\n"); err != nil {
		t.Fatal(err)
	}
	waitActive(t, h)
	if p, _ := h.sandbox.Get(ctx); p.GetDefaultMode() != sandbox.ReadOnly {
		t.Fatalf("policy after the edit: %v", p)
	}
	if pidOf(h, "policy-user") == userPid || pidOf(h, "env") != envPid {
		t.Fatalf("pids: injector %d->%d, env %d->%d", userPid, pidOf(h, "policy-user"), envPid, pidOf(h, "env"))
	}
	// Without a section there is no policy, and Get says what to add.
	if err := applyFile(t, h, file, "plugins:\n  - id: env\n    name: shell-env\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sandbox.Get(ctx); !errors.Is(err, sandbox.ErrNoPolicy) || !strings.Contains(err.Error(), "sandbox:") {
		t.Fatalf("no section: %v", err)
	}
	// A plugin cannot provide it.
	err = applyFile(t, h, file, "plugins:\n  - id: env\n    name: shell-env\n  - id: policy-owner\n    name: probe\n")
	if err == nil || !strings.Contains(err.Error(), `service "sandboxPolicy" is provided by the host itself`) {
		t.Fatalf("a plugin providing sandboxPolicy: %v", err)
	}
}
