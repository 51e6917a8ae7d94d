package procs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/host/watchdog"
)

// cgroupRoot is this manager's cgroup v2 directory. Each command gets a
// child cgroup, so the whole tree (setsid and double-forked children
// included) can be found and killed with one write to cgroup.kill.
//
// Child cgroups are reused: a process started into a cgroup that never held
// one took ~0.25 ms longer here (`bash -c true` from start to exit: 1.71 ms
// against 1.50 ms into a cgroup that held a process before), more than the
// rest of a spawn's overhead. A cgroup is pooled only while it is empty and
// as it was made (see release).
type cgroupRoot struct {
	dir string
	lim *limiter // the trees' limits (limits_linux.go)

	mu     sync.Mutex
	idle   []*cgroup
	made   int
	closed bool
}

// maxIdleCgroups bounds the pool; more concurrent commands than this still
// work, their cgroups are removed when they end.
const maxIdleCgroups = 32

// findCgroup2 returns the mount point of the cgroup v2 hierarchy.
func findCgroup2() (string, error) { return watchdog.FindCgroup2() }

// newCgroupRoot makes <cgroup2>/dsh-<pid>-<nonce>. It fails where cgroups
// are not writable (unprivileged, or delegated elsewhere).
func newCgroupRoot(name string) (*cgroupRoot, error) {
	mnt, err := findCgroup2()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mnt, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("cgroup %s: no cgroup.kill (kernel older than 5.14?)", dir)
	}
	return &cgroupRoot{dir: dir}, nil
}

// child returns an empty cgroup for one command, opened for
// CLONE_INTO_CGROUP: an idle one from the pool, or a new one.
func (r *cgroupRoot) child() (*cgroup, error) {
	r.mu.Lock()
	if n := len(r.idle); n > 0 {
		c := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		return c, nil
	}
	r.made++
	dir := filepath.Join(r.dir, "c"+strconv.Itoa(r.made))
	r.mu.Unlock()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	c := &cgroup{dir: dir, fd: fd}
	if r.lim != nil {
		if err := r.lim.addV1(c); err != nil {
			c.remove()
			return nil, err
		}
	}
	return c, nil
}

// readFile reads one of the root's control files.
func (r *cgroupRoot) readFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(r.dir, name))
}

// release takes back a command's cgroup once its tree is gone. Only a
// cgroup as it was made is pooled: one still holding a process, one that
// was killed, or one the command changed (froze it, set limits, made
// children, made it threaded, changed its limits), and one where a limit
// stopped something, are removed instead (or left to close when they
// cannot be).
func (r *cgroupRoot) release(c *cgroup) {
	if c.pristine() && (r.lim == nil || r.lim.pristine(c)) {
		r.mu.Lock()
		if !r.closed && len(r.idle) < maxIdleCgroups {
			r.idle = append(r.idle, c)
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
	c.remove()
}

// close kills whatever is left under the root and removes it.
func (r *cgroupRoot) close() {
	r.mu.Lock()
	r.closed = true
	for _, c := range r.idle {
		_ = unix.Close(c.fd)
		c.lim.pids.remove()
		c.lim.mem.remove()
	}
	r.idle = nil
	r.mu.Unlock()
	ents, _ := os.ReadDir(r.dir)
	for _, e := range ents {
		if e.IsDir() {
			c := &cgroup{dir: filepath.Join(r.dir, e.Name()), fd: -1}
			c.kill()
			c.remove()
		}
	}
	_ = os.Remove(r.dir)
	if r.lim != nil {
		r.lim.close()
	}
}

// cgroup holds the whole tree of one command.
type cgroup struct {
	dir string
	fd  int
	// killed is set once cgroup.kill was written: on this kernel (6.18) a
	// process later started into such a cgroup with CLONE_INTO_CGROUP is
	// SIGKILLed at birth, so it is never pooled.
	killed bool
	lim    treeLimits
}

// kill sends SIGKILL to every process in the cgroup.
func (c *cgroup) kill() {
	c.killed = true
	_ = os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
}

// signal sends sig to every process in the cgroup.
func (c *cgroup) signal(sig syscall.Signal) {
	for _, pid := range c.pids() {
		_ = syscall.Kill(pid, sig)
	}
}

func (c *cgroup) pids() []int {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// events reads cgroup.events.
func (c *cgroup) events() (populated, frozen bool, err error) {
	b, err := c.read("cgroup.events")
	if err != nil {
		return false, false, err
	}
	ev := string(b)
	return !strings.Contains(ev, "populated 0"), strings.Contains(ev, "frozen 1"), nil
}

// read reads one of the cgroup's small control files. Every command ends
// with several of these reads, so they are made relative to the cgroup's
// open directory and with bare system calls: open, read, close, where
// os.ReadFile also stats the file and tries to poll it.
func (c *cgroup) read(name string) ([]byte, error) {
	var fd int
	var err error
	if c.fd >= 0 {
		fd, err = unix.Openat(c.fd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	} else {
		fd, err = unix.Open(filepath.Join(c.dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(c.dir, name), Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 512) // the files read this way hold a few short lines
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: filepath.Join(c.dir, name), Err: err}
	}
	return buf[:n], nil
}

// pristineFiles are the settings a command may have changed in its own
// cgroup, with their values as made (cgroup.freeze is missing on kernels
// before 5.2).
var pristineFiles = [...]struct{ name, want string }{
	{"cgroup.type", "domain"},
	{"cgroup.max.descendants", "max"},
	{"cgroup.max.depth", "max"},
	{"cgroup.subtree_control", ""},
	{"cgroup.freeze", "0"},
}

// hasChildren reports whether the cgroup has child cgroups: a cgroup file
// system directory counts its subdirectories in its link count, so one
// fstat answers without listing it.
func (c *cgroup) hasChildren() bool {
	if c.fd >= 0 {
		var st unix.Stat_t
		if err := unix.Fstat(c.fd, &st); err == nil {
			return st.Nlink != 2
		}
	}
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return true
	}
	for _, e := range ents {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// empty reports whether no process is left in the cgroup. A cgroup that is
// gone is empty; one whose state cannot be read is not.
func (c *cgroup) empty() bool {
	populated, _, err := c.events()
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	return err == nil && !populated
}

// pristine reports whether the cgroup is empty and as it was made, so the
// next command may start in it.
func (c *cgroup) pristine() bool {
	if c.killed {
		return false
	}
	populated, frozen, err := c.events()
	if err != nil || populated || frozen {
		return false
	}
	for _, f := range pristineFiles {
		b, err := c.read(f.name)
		if err != nil && !(errors.Is(err, os.ErrNotExist) && f.name == "cgroup.freeze") {
			return false
		}
		if err == nil && strings.TrimSpace(string(b)) != f.want {
			return false
		}
	}
	return !c.hasChildren()
}

// killAndWait kills the tree and waits (bounded) until it is gone.
func (c *cgroup) killAndWait(bound time.Duration) bool {
	if c.empty() {
		return true // the usual case once the main process has exited
	}
	c.kill()
	deadline := time.Now().Add(bound)
	for !c.empty() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// remove closes the fd and removes the (empty) cgroup, and its v1 ones.
func (c *cgroup) remove() {
	if c.fd >= 0 {
		_ = unix.Close(c.fd)
		c.fd = -1
	}
	removeDir(c.dir)
	c.lim.pids.remove()
	c.lim.mem.remove()
}

// removeDir removes an empty cgroup, again for a while as its last tasks
// finish leaving it.
func removeDir(dir string) {
	for i := 0; i < 50; i++ {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
