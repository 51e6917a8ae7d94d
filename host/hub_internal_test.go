package host

import (
	"testing"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
)

func TestMethodKind(t *testing.T) {
	for method, want := range map[string]kind{
		"/dsh.shell.v1.Shell/Run":             unary,
		"/dsh.shell.v1.Shell/Exec":            unary,
		"/dsh.shellenv.v1.ShellEnv/Watch":     streaming,
		"/dsh.shellenv.v1.ShellEnv/Collect":   unary,
		"/dsh.shell.v1.Shell/NoSuchMethod":    unknown,
		"/acme.thirdparty.v1.Thing/Do":        unknown,
		"/dsh.subprocess.v1.Subprocess/Start": unary,
	} {
		if got := methodKind(method); got != want {
			t.Errorf("methodKind(%q) = %d, want %d", method, got, want)
		}
	}
}

func TestDescribedMethodKinds(t *testing.T) {
	ep := &endpoint{kinds: describedKinds(&pluginv1.Provide{
		Key:          "thing",
		GrpcServices: []string{"acme.thirdparty.v1.Thing"},
		Methods: []*pluginv1.Method{
			{Name: "/acme.thirdparty.v1.Thing/Do"},
			{Name: "/acme.thirdparty.v1.Thing/Follow", ServerStreaming: true},
			{Name: "/acme.thirdparty.v1.Thing/Upload", ClientStreaming: true},
			{Name: "/acme.other.v1.Other/Do"}, // not a service of the key
		},
	})}
	for method, want := range map[string]kind{
		"/acme.thirdparty.v1.Thing/Do":     unary,
		"/acme.thirdparty.v1.Thing/Follow": streaming,
		"/acme.thirdparty.v1.Thing/Upload": streaming,
		"/acme.thirdparty.v1.Thing/Other":  unknown,
		"/acme.other.v1.Other/Do":          unknown,
		"/dsh.shellenv.v1.ShellEnv/Watch":  streaming, // linked into the host
	} {
		if got := ep.methodKind(method); got != want {
			t.Errorf("methodKind(%q) = %d, want %d", method, got, want)
		}
	}
}
