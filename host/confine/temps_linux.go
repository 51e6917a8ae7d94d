package confine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Temps are the owners' private temporary folders of one host:
// <base>/host-<pid>-<random>/<owner>/{tmp,shm}. A confined command of an
// owner sees its tmp as /tmp (and TMPDIR) and its shm as /dev/shm, in
// workspace-write mode; the same owner's commands share them (a build
// across commands), no other owner's see them (the base is hidden from
// every command), and an owner's go when it is released.
//
// The host holds an exclusive lock on a file in its folder for as long as
// it runs: a folder whose lock can be taken belongs to a host that is gone
// (however it ended, SIGKILL included), and the next Temps opened on the
// same base removes it. Pids alone would not do: hosts in other PID
// namespaces share the base, and pids are reused.
type Temps struct {
	base string
	dir  string
	lock *os.File

	mu     sync.Mutex
	closed bool
}

// lockName is the file of a host's folder its host holds locked.
const lockName = ".lock"

// DefaultTempBase is <the host's temporary directory>/dsh-<uid>-tmp.
func DefaultTempBase() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("dsh-%d-tmp", os.Getuid()))
}

// OpenTemps makes this host's folder under base ("" is DefaultTempBase),
// after removing the folders of hosts that are gone.
func OpenTemps(base string) (*Temps, error) {
	if base == "" {
		base = DefaultTempBase()
	}
	if !filepath.IsAbs(base) {
		return nil, fmt.Errorf("temporary folders: %s is not an absolute path", base)
	}
	base = filepath.Clean(base)
	var b [6]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(base, "host-"+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(b[:]))
	// Another host may remove the base when it leaves it empty, between
	// our making it and our folder in it: make both again.
	var err error
	for range 3 {
		if err = ownBase(base); err != nil {
			return nil, err
		}
		if err = os.Mkdir(dir, 0o700); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("temporary folders: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("temporary folders: lock %s: %w", dir, err)
	}
	t := &Temps{base: base, dir: dir, lock: lock}
	SweepTemps(base)
	return t, nil
}

// ownBase makes base (mode 0700) and checks that it is a directory of
// ours, not a symlink or another user's: a shared /tmp lets anyone make
// it first.
func ownBase(base string) error {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return fmt.Errorf("temporary folders: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(base, &st); err != nil {
		return fmt.Errorf("temporary folders: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("temporary folders: %s is not a directory owned by uid %d", base, os.Getuid())
	}
	if st.Mode&0o077 != 0 {
		if err := os.Chmod(base, 0o700); err != nil {
			return fmt.Errorf("temporary folders: %w", err)
		}
	}
	return nil
}

// SweepTemps removes the folders under base of hosts that are gone: their
// lock can be taken, or they have none and their pid is not alive (a host
// that died before it locked).
func SweepTemps(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "host-") {
			continue
		}
		dir := filepath.Join(base, name)
		if hostGone(dir, name) {
			_ = os.RemoveAll(dir)
		}
	}
}

// hostGone reports whether the host of folder dir (named name) is gone.
func hostGone(dir, name string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		pid, perr := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, "host-"), "-", 2)[0])
		if perr != nil || pid <= 0 {
			return false
		}
		err := unix.Kill(pid, 0)
		return errors.Is(err, unix.ESRCH)
	}
	if err != nil {
		return false
	}
	defer f.Close() // drops the lock, if taken
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// Base is the folder every host's temporary folders are under: commands
// must not see it.
func (t *Temps) Base() string { return t.base }

// Dir is this host's folder.
func (t *Temps) Dir() string { return t.dir }

// Path is owner's folder (it may not exist).
func (t *Temps) Path(owner string) string {
	// Hashed: an owner id is any string, and two may not share a folder.
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(t.dir, "o"+hex.EncodeToString(sum[:12]))
}

// For makes (if needed) and returns owner's folder, for Options.Tmp.
func (t *Temps) For(owner string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", errors.New("temporary folders: the host is shutting down")
	}
	d := t.Path(owner)
	for _, sub := range []string{d, filepath.Join(d, "tmp"), filepath.Join(d, "shm")} {
		err := os.Mkdir(sub, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil && sub != d {
			// Sticky and open to all, as /tmp is (the owner's folder
			// around them keeps others out).
			err = os.Chmod(sub, 0o777|fs.ModeSticky)
		}
		if err != nil {
			return "", fmt.Errorf("temporary folder of %s: %w", owner, err)
		}
	}
	return d, nil
}

// Release removes owner's folder (its commands are gone).
func (t *Temps) Release(owner string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return removeAll(t.Path(owner))
}

// Close removes this host's folder, and the base when no other host has
// one there. For fails afterwards.
func (t *Temps) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	err := removeAll(t.dir)
	t.lock.Close()
	_ = os.Remove(t.base) // fails while another host's folder is there
	return err
}

// removeAll is os.RemoveAll that first makes every directory writable: a
// command may leave read-only ones (go's module cache does).
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
