package localexec

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

// An executor plugin provides ctx.shell under the shell settings, calls
// ctx.subprocess and what its wrapper names, and says a sandbox mode only
// when it has one.
func TestPluginDescribesAnExecutor(t *testing.T) {
	p := &Plugin{Name: "x", Version: "1", Summary: "s", Exec: Bash(), Inject: []sdk.Inject{{Key: "sandbox"}}}
	d := p.Describe()
	if d.Name != "x" || d.Version != "1" || d.Summary != "s" || d.SettingsNamespace != shell.SettingsNamespace || d.ConfigSchema != sdk.SchemaOf[Config]() {
		t.Fatalf("description: %+v", d)
	}
	if len(d.Provides) != 1 || d.Provides[0].Key != shell.Key || !slices.Equal(d.Inject, []sdk.Inject{{Key: subprocess.Key}, {Key: "sandbox"}}) {
		t.Fatalf("keys: provides %+v, inject %+v", d.Provides, d.Inject)
	}
	if f := p.Facts(); f != nil {
		t.Fatalf("facts without a mode: %v", f)
	}
	p.Mode = func() string { return string(shell.WorkspaceWrite) }
	if f := p.Facts(); f[shell.Key][shell.FactSandboxMode] != "workspace-write" {
		t.Fatalf("facts: %v", f)
	}
}

// A config Apply refuses leaves the executor as it was, and the hook is
// never asked.
func TestPluginApplyRefusesABadConfig(t *testing.T) {
	p := &Plugin{Exec: Bash(), Setup: func(context.Context, *sdk.Host, json.RawMessage, *Config) error {
		t.Fatal("setup ran on a refused config")
		return nil
	}}
	err := p.Apply(context.Background(), nil, json.RawMessage(`{"timeoutMs": 5000, "maxTimeoutMs": 1000}`))
	if err == nil || err.Error() != "config: timeoutMs 5000 is above maxTimeoutMs 1000" {
		t.Fatalf("apply: %v", err)
	}
	if p.Exec.Cfg != (Config{}) || p.Exec.Sub != nil {
		t.Fatalf("executor changed: %+v", p.Exec)
	}
}
