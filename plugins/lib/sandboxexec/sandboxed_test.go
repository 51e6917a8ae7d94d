package sandboxexec

import (
	"context"
	"errors"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/shell"
)

// A mode the request names is one of the three, or the request is refused
// in a sentence the model reads as it is.
func TestResolveRefusesAnUnknownMode(t *testing.T) {
	e := New(&localexec.Executor{Cfg: localexec.Config{Cwd: "/w"}}, &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: "/w"}, nil)
	spec, err := e.Resolve(context.Background(), &shell.ExecRequest{Command: "x", SandboxPolicy: &shell.SandboxPolicy{Mode: sandbox.ReadOnly}})
	if err != nil || spec.SandboxPolicy.GetMode() != sandbox.ReadOnly {
		t.Fatalf("read-only: %+v %v", spec.GetSandboxPolicy(), err)
	}
	_, err = e.Resolve(context.Background(), &shell.ExecRequest{Command: "x", SandboxPolicy: &shell.SandboxPolicy{Mode: "yolo"}})
	want := `There is no sandbox mode "yolo": the modes are read-only, workspace-write and danger-full-access.`
	if !errors.Is(err, shell.ErrInvalid) || err.Error() != want {
		t.Fatalf("unknown mode: %v, want %q", err, want)
	}
}

// A workdir under the home directory resolves as the local executor
// resolves it; what the command may do there is the policy's to say.
func TestResolveHomeWorkdir(t *testing.T) {
	t.Setenv("HOME", "/home/agent")
	e := New(&localexec.Executor{Cfg: localexec.Config{Cwd: "/w"}}, &sandbox.Policy{DefaultMode: sandbox.ReadOnly, WorkspaceRoot: "/w"}, nil)
	spec, err := e.Resolve(context.Background(), &shell.ExecRequest{Command: "x", Workdir: "~/src"})
	if err != nil || spec.Workdir != "/home/agent/src" || spec.SandboxPolicy.GetMode() != sandbox.ReadOnly {
		t.Fatalf("~/src: %q %+v %v", spec.GetWorkdir(), spec.GetSandboxPolicy(), err)
	}
}
