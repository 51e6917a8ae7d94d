package host

import "testing"

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
