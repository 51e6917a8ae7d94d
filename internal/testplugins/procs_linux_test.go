package testplugins

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Matching counts this process's descendants and orphans, not another test
// binary's processes (a second `go test` beside this one).
func TestMatchingIsOurs(t *testing.T) {
	// A copy of bash, not of /bin/sh: a busybox picks its applet by name.
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	sh, err := os.ReadFile(bash)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.test")
	if err := os.WriteFile(other, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(argv ...string) *exec.Cmd {
		c := exec.Command(argv[0], argv[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL); _ = c.Wait() })
		return c
	}
	start("sh", "-c", "sleep 913.25; :")
	start(other, "-c", "sleep 913.5; :")
	start("sh", "-c", "setsid sleep 913.75 & echo")
	t.Cleanup(func() {
		for _, p := range Matching("sleep 913.75") {
			var pid int
			if _, err := fmt.Sscanf(p, "%d:", &pid); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	seen := func(marker string) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if len(Matching(marker)) > 0 {
				return true
			}
		}
		return false
	}
	if !seen("sleep 913.25") {
		t.Error("a child's child is not counted")
	}
	if !seen("sleep 913.75") {
		t.Error("an orphan is not counted")
	}
	all := func(int) bool { return true }
	for deadline := time.Now().Add(10 * time.Second); len(matching("sleep 913.5", all)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the other test binary's process did not start")
		}
	}
	if got := Matching("sleep 913.5"); len(got) > 0 {
		t.Errorf("another test binary's process is counted: %v", got)
	}
	if got := Matching("other.test"); len(got) > 0 {
		t.Errorf("another test binary is counted: %v", got)
	}
}
