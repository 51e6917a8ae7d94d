package watchdog

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Run waits for stdin to close, then kills and removes every cgroup under
// dir. dir must be a dsh cgroup root.
func Run(dir string) error {
	if filepath.Base(dir) == "" || !isDshCgroup(dir) {
		return errors.New("watchdog: not a dsh cgroup: " + dir)
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // returns when the host is gone
	// cgroup.kill on the root kills every descendant at once.
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			child := filepath.Join(dir, e.Name())
			_ = os.WriteFile(filepath.Join(child, "cgroup.kill"), []byte("1"), 0)
			removeCgroup(child)
		}
	}
	_ = os.Remove(dir)
	return nil
}

// removeCgroup removes an emptied cgroup, retrying while its killed
// processes are still being reaped.
func removeCgroup(dir string) {
	for i := 0; i < 50; i++ {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func isDshCgroup(dir string) bool {
	mnt, err := FindCgroup2()
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(mnt, dir)
	return err == nil && filepath.Dir(rel) == "." && len(rel) > 4 && rel[:4] == "dsh-"
}

// FindCgroup2 returns the mount point of the cgroup v2 hierarchy.
func FindCgroup2() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 20:41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4], nil
			}
		}
	}
	return "", errors.New("no cgroup2 hierarchy is mounted")
}
