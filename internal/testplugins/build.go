package testplugins

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Names lists the plugins this package holds, and the real plugins tests
// build beside them.
var (
	Test = []string{"probe", "noop", "oldproto", "newproto", "baddesc", "chatty", "termdrive"}
	Real = []string{"shell-env", "bash-local", "bash-sandbox", "pwsh-local", "pwsh-sandbox", "tool-bash", "tool-pwsh", "terminal-bash", "terminal-kubernetes", "tool-terminal", "tool-bash-persistent", "tool-pwsh-persistent", "hooks-claude-code", "hooks-codex", "bash-kubernetes"}
)

// Root is the module's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Build compiles the test plugins and the named real plugins as
// dir/dsh-<name>, plus the dsh command as dir/dsh and its watchdog as
// dir/dsh_watchdog, and returns dir.
func Build(dir string) error {
	root := Root()
	type target struct{ out, pkg string }
	targets := []target{{"dsh", "./host/cmd/dsh"}, {"dsh_watchdog", "./host/cmd/dsh_watchdog"}}
	for _, n := range Real {
		targets = append(targets, target{"dsh-" + n, "./plugins/" + n})
	}
	for _, n := range Test {
		targets = append(targets, target{"dsh-" + n, "./internal/testplugins/" + n})
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, t := range targets {
		args = append(args, t.pkg)
	}
	// One go build for every main package: output names are the package
	// folder names, renamed below.
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	// As make build does: statically linked, what is shipped and measured.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	for _, t := range targets {
		from := filepath.Join(dir, filepath.Base(t.pkg))
		if from == filepath.Join(dir, t.out) {
			continue
		}
		if err := os.Rename(from, filepath.Join(dir, t.out)); err != nil {
			return err
		}
	}
	return nil
}

// Main is a TestMain for packages that test the real binaries: it builds
// them into a new temporary folder (its path in *dir), runs the tests, fails
// the run if any process of those binaries is left, and removes the folder.
func Main(m *testing.M, prefix string, dir *string) {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		panic(err)
	}
	if err := Build(d); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*dir = d
	code := m.Run()
	if left := Running(d); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "processes left behind: %v\n", left)
		code = 1
	}
	_ = os.RemoveAll(d)
	os.Exit(code)
}
