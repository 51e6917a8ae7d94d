//go:build unix

package host

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Directories of dead hosts are swept; those of live ones are kept.
func TestRuntimeDirSweep(t *testing.T) {
	base := t.TempDir()
	dead := filepath.Join(base, "host-999999999")
	live := filepath.Join(base, "host-1")
	// A host that had our parent's pid once: the pid runs, but not since
	// the start the directory holds.
	reused := filepath.Join(base, "host-"+strconv.Itoa(os.Getppid()))
	for _, d := range []string{dead, live, reused} {
		if err := os.MkdirAll(filepath.Join(d, "sockets"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(live, hostStartFile), []byte(processStart(1)), 0o600)
	_ = os.WriteFile(filepath.Join(reused, hostStartFile), []byte("1"), 0o600)
	rt, err := newRuntimeDir(base)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.remove()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("dead host's directory kept: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live host's (pid 1) directory swept: %v", err)
	}
	if _, err := os.Stat(reused); processStart(os.Getppid()) != "" && !os.IsNotExist(err) {
		t.Errorf("the directory of a dead host whose pid runs again kept: %v", err)
	}
	if rt.dir != filepath.Join(base, "host-"+strconv.Itoa(os.Getpid())) {
		t.Errorf("dir = %s", rt.dir)
	}
	if b, err := os.ReadFile(filepath.Join(rt.dir, hostStartFile)); processStart(os.Getpid()) != "" && (err != nil || string(b) != processStart(os.Getpid())) {
		t.Errorf("the host's start in its directory: %q %v", b, err)
	}
	fi, err := os.Stat(rt.sockets())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("sockets dir: %v %v", fi, err)
	}
}

// Plugins get a minimal environment: no credentials, nothing unexpected.
func TestPluginEnv(t *testing.T) {
	host := map[string]string{
		"PATH": "/bin", "HOME": "/root", "OPENAI_API_KEY": "sk-x", "DSH_HOME": "/d",
		"AWS_SECRET_ACCESS_KEY": "s", "RANDOM_VAR": "r", "LANG": "C.UTF-8",
	}
	env := strings.Join(PluginEnv(func(k string) (string, bool) { v, ok := host[k]; return v, ok }, "x"), "\n")
	for _, want := range []string{"PATH=/bin", "HOME=/root", "DSH_HOME=/d", "LANG=C.UTF-8", "DSH_PLUGIN_ID=x", "DSH_HOST_PID="} {
		if !strings.Contains(env, want) {
			t.Errorf("missing %s in\n%s", want, env)
		}
	}
	for _, bad := range []string{"OPENAI", "AWS", "RANDOM_VAR"} {
		if strings.Contains(env, bad) {
			t.Errorf("%s leaked:\n%s", bad, env)
		}
	}
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
