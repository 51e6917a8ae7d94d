package hub

import (
	"testing"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
	// The host links the core contracts too (it serves them).
	_ "github.com/dshrun/dsh/core/subprocess/subprocessv1"
)

func TestMethodKind(t *testing.T) {
	for method, want := range map[string]Kind{
		"/dsh.shell.v1.Shell/Run":             Unary,
		"/dsh.shell.v1.Shell/Exec":            Unary,
		"/dsh.shellenv.v1.ShellEnv/Watch":     Streaming,
		"/dsh.shellenv.v1.ShellEnv/Collect":   Unary,
		"/dsh.shell.v1.Shell/NoSuchMethod":    Unknown,
		"/acme.thirdparty.v1.Thing/Do":        Unknown,
		"/dsh.subprocess.v1.Subprocess/Start": Unary,
	} {
		if got := methodKind(method); got != want {
			t.Errorf("methodKind(%q) = %d, want %d", method, got, want)
		}
	}
}

func TestDescribedMethodKinds(t *testing.T) {
	kinds := DescribedKinds(&pluginv1.Provide{
		Key:          "thing",
		GrpcServices: []string{"acme.thirdparty.v1.Thing"},
		Methods: []*pluginv1.Method{
			{Name: "/acme.thirdparty.v1.Thing/Do"},
			{Name: "/acme.thirdparty.v1.Thing/Follow", ServerStreaming: true},
			{Name: "/acme.thirdparty.v1.Thing/Upload", ClientStreaming: true},
			{Name: "/acme.other.v1.Other/Do"}, // not a service of the key
		},
	})
	for method, want := range map[string]Kind{
		"/acme.thirdparty.v1.Thing/Do":     Unary,
		"/acme.thirdparty.v1.Thing/Follow": Streaming,
		"/acme.thirdparty.v1.Thing/Upload": Streaming,
		"/acme.thirdparty.v1.Thing/Other":  Unknown,
		"/acme.other.v1.Other/Do":          Unknown,
		"/dsh.shellenv.v1.ShellEnv/Watch":  Streaming, // linked into the host
	} {
		if got := kinds.Of(method); got != want {
			t.Errorf("methodKind(%q) = %d, want %d", method, got, want)
		}
	}
}
