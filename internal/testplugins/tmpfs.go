package testplugins

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tmpfs mounts a tmpfs with the given size option ("4m", "4m,nr_inodes=8")
// on a new folder of the test and unmounts it at the end; where mounting is
// not permitted (it needs root or CAP_SYS_ADMIN) the test is skipped.
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		// A process that held a file there may take a moment to go.
		for i := 0; ; i++ {
			out, err := exec.Command("umount", dir).CombinedOutput()
			if err == nil {
				return
			}
			if i == 100 {
				t.Errorf("umount %s: %v: %s", dir, err, out)
				_ = exec.Command("umount", "-l", dir).Run()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir
}
