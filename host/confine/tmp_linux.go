package confine

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/sandbox"
)

// The owner's private temporary folder in the landlock runner's mount
// namespace (see Temps): its tmp is mounted on /tmp, its shm on /dev/shm,
// both writable (Landlock too), without devices or setuid. The host's /tmp
// is then out of sight but for what the namespace must still show at its
// path there: the writable roots under /tmp, and the hidden directories
// under /tmp that show something (the owner's spill files). Those are
// cloned, with everything mounted inside them, before /tmp is covered,
// and mounted back on directories made for them in the owner's folder.

const (
	tmpDir = "/tmp"
	shmDir = "/dev/shm"
)

// privateTmp is the plan of the owner's folder in a namespace.
type privateTmp struct {
	dir  string   // the owner's folder (Options.Tmp)
	keep []string // under /tmp, shown as the host has them: outer first
}

// planTmp plans the owner's folder dir ("" for none) in pl for mode
// (pl.tmp), and gives the states of what it mounts, for Stale. Nothing is
// mounted without a folder, in read-only mode, or when a writable root
// holds /tmp already.
func (pl *mountPlan) planTmp(dir, mode string) ([]pathState, error) {
	if dir == "" || mode != sandbox.WorkspaceWrite {
		return nil, nil
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, fmt.Errorf("temporary folder %q is not an absolute, clean path", dir)
	}
	for _, w := range pl.writable {
		if within(w, tmpDir) {
			return nil, nil
		}
	}
	var states []pathState
	for _, p := range []string{tmpDir, filepath.Join(dir, "tmp"), filepath.Join(dir, "shm")} {
		st, fi, err := stateOf(p)
		if err != nil {
			return nil, fmt.Errorf("temporary folder: %w", err)
		}
		if !st.exists || !fi.IsDir() {
			return nil, fmt.Errorf("temporary folder: %s is not a directory", p)
		}
		states = append(states, st)
	}
	var keep []string
	for _, w := range pl.writable {
		if within(tmpDir, w) {
			keep = append(keep, w)
		}
	}
	for _, h := range pl.hide {
		if !within(tmpDir, h) {
			continue
		}
		for _, s := range slices.Concat(pl.show, pl.reveal) {
			if s != h && within(h, s) {
				keep = append(keep, h)
				break
			}
		}
	}
	// The named unix sockets (socketsns_linux.go) under /tmp are bound
	// back; of the covers, only those /tmp still shows matter.
	for _, a := range pl.allowed {
		if within(tmpDir, a) && !under(pl.hide, a) {
			keep = append(keep, a)
		}
	}
	keep = outermost(sortedSet(keep))
	unseen := func(s string) bool { return within(tmpDir, s) && !under(keep, s) }
	pl.covers, pl.young = slices.DeleteFunc(pl.covers, unseen), slices.DeleteFunc(pl.young, unseen)
	pl.tmp = &privateTmp{dir: dir, keep: keep}
	return states, nil
}

// rule lets the command write in its /tmp and /dev/shm; made in the
// namespace, where they are the owner's folders.
func (t *privateTmp) rule() landlock.Rule {
	return landlock.RWDirs(tmpDir, shmDir).WithRefer()
}

// env is what the environment of a command under mode with the owner's
// folder tmp must hold: its temporary directory is /tmp, whatever the
// host's was (that one is read-only inside).
func tmpEnv(tmp, mode string) map[string]string {
	if tmp == "" || mode != sandbox.WorkspaceWrite {
		return nil
	}
	return map[string]string{"TMPDIR": tmpDir}
}

// clone clones the owner's tmp and shm while the tree is still writable
// and the folder not yet hidden: fds to mount later (cover, shm).
func (t *privateTmp) clone() ([]int, error) {
	if t == nil {
		return nil, nil
	}
	var fds []int
	for _, sub := range []string{"tmp", "shm"} {
		p := filepath.Join(t.dir, sub)
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC)
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("clone temporary folder %s: %w", p, err)
		}
		fds = append(fds, fd)
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOSUID}); err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("temporary folder %s without devices: %w", p, err)
		}
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// cover mounts the owner's tmp (fds from clone) on /tmp, the paths to
// keep back at their places on it. The tree under them is complete by
// then (protected paths, hidden and shown directories).
func (t *privateTmp) cover(fds []int) error {
	if t == nil {
		return nil
	}
	kept := make([]int, 0, len(t.keep))
	defer func() { closeAll(kept) }()
	for _, k := range t.keep {
		fd, err := unix.OpenTree(unix.AT_FDCWD, k, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("keep %s in /tmp: %w", k, err)
		}
		kept = append(kept, fd)
	}
	if err := unix.MoveMount(fds[0], "", unix.AT_FDCWD, tmpDir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount the temporary folder on /tmp: %w", err)
	}
	for i, k := range t.keep {
		// A directory, or a unix socket the policy names.
		isDir, err := isDirFD(kept[i])
		if err != nil {
			return fmt.Errorf("keep %s in /tmp: %w", k, err)
		}
		if isDir {
			var at int
			if at, err = mountPoint(k); err != nil {
				return fmt.Errorf("keep %s in /tmp: %w", k, err)
			}
			err = unix.MoveMount(kept[i], "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
			unix.Close(at)
		} else {
			var at int
			if at, err = mountPoint(filepath.Dir(k)); err != nil {
				return fmt.Errorf("keep %s in /tmp: %w", k, err)
			}
			if err = emptyFileAt(at, filepath.Base(k)); err == nil {
				err = unix.MoveMount(kept[i], "", at, filepath.Base(k), unix.MOVE_MOUNT_F_EMPTY_PATH)
			}
			unix.Close(at)
		}
		if err != nil {
			return fmt.Errorf("keep %s in /tmp: %w", k, err)
		}
	}
	return nil
}

// shm mounts the owner's shm on /dev/shm (after newDev made it).
func (t *privateTmp) shm(fds []int) error {
	if t == nil {
		return nil
	}
	if err := unix.MoveMount(fds[1], "", unix.AT_FDCWD, shmDir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount the temporary folder on %s: %w", shmDir, err)
	}
	return nil
}

// mountPoint makes the directory path under /tmp (now the owner's folder)
// and opens it, one component at a time and never through a symlink: the
// owner's commands may have put anything there. What is not a directory
// on the way is removed (the mount covers that place anyway).
func mountPoint(path string) (int, error) {
	rel, err := filepath.Rel(tmpDir, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return -1, fmt.Errorf("%s is not under %s", path, tmpDir)
	}
	fd, err := unix.Open(tmpDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, name := range strings.Split(rel, "/") {
		if name == "." || name == "" {
			continue
		}
		next, err := openDirAt(fd, name)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// openDirAt opens (making it if need be) the directory name in dir.
func openDirAt(dir int, name string) (int, error) {
	for attempt := 0; ; attempt++ {
		if err := unix.Mkdirat(dir, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("mkdir %s: %w", name, err)
		}
		fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			return fd, nil
		}
		if attempt > 0 || !(errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			return -1, fmt.Errorf("open %s: %w", name, err)
		}
		if err := unix.Unlinkat(dir, name, 0); err != nil {
			return -1, fmt.Errorf("remove %s (not a directory): %w", name, err)
		}
	}
}
