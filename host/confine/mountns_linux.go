package confine

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The mount layer. Landlock cannot make a folder inside a writable root
// read-only, nor hide a directory that reads are allowed in; a mount
// namespace can. One is built per prepared policy, once, and each
// confined command's thread enters it.
//
// Its tree: every mount private, read-only and without devices; the
// writable roots bound back read-write on top (still without devices);
// inside them, each existing protected path a read-only bind of itself,
// and every directory between the root and it a read-write bind of itself
// (a mount point cannot be renamed or removed: EBUSY, so `mv .git x; mkdir
// -p .git; echo > .git/config` cannot put a writable .git/config where the
// protected one was); the directories the host hides and every cgroup file
// system under an empty read-only tmpfs; and a /dev of its own (see
// newDev): Landlock lets a command read everything, and as root without
// capabilities it may still open what root owns, such as the disks and
// the terminals of the host's users.
//
// The command does not see that tree at its root but a recursive copy of
// it mounted on chrootAnchor, with its root set there: a process whose
// root is not its mount namespace's root may not create user namespaces
// (the kernel's "chrooted" rule). That is what stops clone3, which the
// seccomp filter must let through (see seccomp_linux.go); and with cgroup
// file systems hidden, no cgroup can be named to clone3 to leave the
// command's tree.

// chrootAnchor is the directory of the namespace's tree the command's root
// is mounted on. Any directory would do: the command never sees the tree
// under its root; /proc is one that always exists.
const chrootAnchor = "/proc"

// mountPlan is what the namespace holds, worked out from the policy.
type mountPlan struct {
	writable []string // the writable roots, outer before inner
	pinned   []string // directories between a root and a protected path: read-write self-binds
	readOnly []string // protected paths that exist inside a writable root: read-only self-binds
	hide     []string // directories covered by an empty read-only tmpfs
	show     []string // directories inside a hidden one bound back read-only
	// The unix sockets when the policy names some (socketsns_linux.go).
	covers  []string // the host's other sockets: the null device mounted on each
	young   []string // the others too young to be covered yet
	reveal  []string // named ones under a hidden directory: bound back in it
	named   []string // as the policy names them
	allowed []string // those that exist, resolved
	// keepCgroups leaves cgroup file systems visible (tests only).
	keepCgroups bool
	tmp         *privateTmp // the owner's temporary folder; nil for none
}

// namespaces are a policy's built namespaces, as open
// /proc/thread-self/ns/* of the thread that built them: the mount
// namespace; an IPC namespace (System V shared memory, semaphores and
// message queues, and POSIX message queues, of the host's root-owned
// processes would be open to a command running as root); and the network
// namespace when the network is off (-1 otherwise). Entering prepared
// ones costs microseconds; making a network namespace per command costs
// about a millisecond here (see BenchmarkTrue). Commands of one policy
// share its namespaces, so they may reach each other's loopback servers
// and IPC objects, as they share its writable roots.
type namespaces struct {
	mnt, ipc, net int
}

// pathState is what a path the namespace was built from (a writable
// root, a protected path or a directory on the way to one, a hidden
// directory) was at Prepare: the mounts hold those very files, so a change
// outside (a new file renamed over one, a path that appears) makes the
// namespace stale.
type pathState struct {
	path     string
	exists   bool
	dev, ino uint64
	// bound is a unix socket's change time (its bind): a socket removed
	// and bound again often gets the freed inode number back.
	bound unix.Timespec
}

func stateOf(path string) (pathState, fs.FileInfo, error) {
	// Not os.Lstat alone: it keeps no device number.
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	switch {
	case err == nil:
		fi, _ := os.Lstat(path)
		ps := pathState{path: path, exists: true, dev: st.Dev, ino: st.Ino}
		if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			ps.bound = st.Ctim
		}
		return ps, fi, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return pathState{path: path}, nil, nil
	default:
		return pathState{}, nil, fmt.Errorf("%s: %w", path, err)
	}
}

// planMounts works out the namespace of writable roots (absolute and
// clean), protected paths, hidden directories and the directories shown
// inside them. It records the state of each of those paths, existing or
// not, for Stale.
func planMounts(writable, protected, hide, show []string) (*mountPlan, []pathState, error) {
	pl := &mountPlan{writable: slices.Clone(writable)}
	// Outer roots first: an inner one is mounted on top of its outer one.
	slices.SortFunc(pl.writable, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	var states []pathState
	for _, w := range pl.writable {
		st, _, err := stateOf(w)
		if err != nil {
			return nil, nil, fmt.Errorf("writable root %w", err)
		}
		if !st.exists {
			return nil, nil, fmt.Errorf("writable root %s does not exist", w)
		}
		states = append(states, st)
	}
	pinned := map[string]bool{}
	for _, p := range protected {
		if !filepath.IsAbs(p) {
			return nil, nil, fmt.Errorf("protected path %q is not absolute", p)
		}
		p = filepath.Clean(p)
		st, fi, err := stateOf(p)
		if err != nil {
			return nil, nil, fmt.Errorf("protected path %w", err)
		}
		states = append(states, st)
		if !st.exists {
			continue // not protected until it exists: Stale says when
		}
		root := ""
		for _, w := range pl.writable {
			if within(w, p) && len(w) > len(root) {
				root = w
			}
		}
		if root == "" {
			continue // outside the writable roots, read-only already
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, fmt.Errorf("protected path %s is a symlink: inside a writable root it could be replaced, so it cannot be kept read-only (protect what it points to instead)", p)
		}
		rel, _ := filepath.Rel(root, p)
		parts := strings.Split(rel, string(filepath.Separator))
		for i := 1; i < len(parts); i++ {
			dir := filepath.Join(root, filepath.Join(parts[:i]...))
			st, fi, err := stateOf(dir)
			if err != nil {
				return nil, nil, fmt.Errorf("protected path %s: %w", p, err)
			}
			if st.exists && fi.Mode()&fs.ModeSymlink != 0 {
				return nil, nil, fmt.Errorf("protected path %s goes through the symlink %s: inside a writable root it could be replaced, so the path cannot be kept read-only", p, dir)
			}
			if !st.exists || !fi.IsDir() {
				return nil, nil, fmt.Errorf("protected path %s: %s changed while the sandbox was being prepared", p, dir)
			}
			if !pinned[dir] {
				pinned[dir] = true
				pl.pinned = append(pl.pinned, dir)
				states = append(states, st)
			}
		}
		pl.readOnly = append(pl.readOnly, p)
	}
	byDepth := func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") }
	slices.SortStableFunc(pl.pinned, byDepth)
	slices.SortStableFunc(pl.readOnly, byDepth)
	show = slices.SortedStableFunc(slices.Values(show), func(a, b string) int { return byDepth(filepath.Clean(a), filepath.Clean(b)) })
	for _, h := range hide {
		if !filepath.IsAbs(h) {
			return nil, nil, fmt.Errorf("hidden directory %q is not absolute", h)
		}
		h = filepath.Clean(h)
		st, fi, err := stateOf(h)
		if err != nil {
			return nil, nil, fmt.Errorf("hidden directory %w", err)
		}
		states = append(states, st)
		if !st.exists {
			continue // nothing to hide until it exists: Stale says when
		}
		if !fi.IsDir() {
			return nil, nil, fmt.Errorf("hidden directory %s is not a directory", h)
		}
		pl.hide = append(pl.hide, h)
	}
	for _, d := range show {
		if !filepath.IsAbs(d) {
			return nil, nil, fmt.Errorf("shown directory %q is not absolute", d)
		}
		d = filepath.Clean(d)
		if !slices.ContainsFunc(pl.hide, func(h string) bool { return d != h && within(h, d) }) {
			continue // not hidden: readable as it is
		}
		st, fi, err := stateOf(d)
		if err != nil {
			return nil, nil, fmt.Errorf("shown directory %w", err)
		}
		states = append(states, st)
		if !st.exists {
			continue // nothing to show until it exists: Stale says when
		}
		if !fi.IsDir() {
			return nil, nil, fmt.Errorf("shown directory %s is not a directory", d)
		}
		pl.show = append(pl.show, d)
	}
	return pl, states, nil
}

// buildNamespaces builds the namespaces of pl (and a network namespace
// with its loopback up unless network) on a thread of its own, which is
// then left to die (its view is the namespaces'); inside runs there, in
// them (what is opened by path there is what commands will see).
func buildNamespaces(pl *mountPlan, network bool, inside func() error) (*namespaces, error) {
	type result struct {
		ns  *namespaces
		err error
	}
	var r result
	onOwnThread(func() {
		ns := &namespaces{mnt: -1, ipc: -1, net: -1}
		fd, err := newNS(unix.CLONE_NEWIPC, "ipc")
		if err != nil {
			r.err = fmt.Errorf("ipc namespace: %w", err)
			return
		}
		ns.ipc = fd
		if !network {
			fd, err := newNetNS()
			if err != nil {
				r.err = fmt.Errorf("network namespace: %w", err)
				return
			}
			ns.net = fd
		}
		if fd, err = pl.build(); err != nil {
			ns.close()
			r.err = fmt.Errorf("mount namespace: %w", err)
			return
		}
		ns.mnt = fd
		if err := inside(); err != nil {
			ns.close()
			r.err = err
			return
		}
		r.ns = ns
	})
	return r.ns, r.err
}

// onOwnThread runs f on a locked OS thread other than the main one, and
// never unlocks it: the runtime ends that thread with its goroutine, and
// whatever f changed about it with it.
func onOwnThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread is never ended. Held here, it cannot be the
			// thread that runs the retry (with one P, a retry that merely
			// unlocked first would land on it again).
			onOwnThread(f)
			runtime.UnlockOSThread()
			return
		}
		f()
	}()
	<-done
}

// newNS moves the calling thread into a new namespace of kind (a
// CLONE_NEW* flag, name its /proc/thread-self/ns entry) and returns it as
// an fd.
func newNS(kind int, name string) (int, error) {
	if err := unix.Unshare(kind); err != nil {
		return -1, fmt.Errorf("unshare: %w", err)
	}
	fd, err := unix.Open("/proc/thread-self/ns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open it: %w", err)
	}
	return fd, nil
}

// newNetNS moves the calling thread into a new network namespace with its
// loopback up, and returns it as an fd.
func newNetNS() (int, error) {
	fd, err := newNS(unix.CLONE_NEWNET, "net")
	if err != nil {
		return -1, err
	}
	if err := loopbackUp(); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("its loopback: %w", err)
	}
	return fd, nil
}

// build makes the calling thread's namespace and returns it as an fd.
func (pl *mountPlan) build() (int, error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return -1, fmt.Errorf("unshare: %w", err)
	}
	// Nothing done here reaches the host's namespace, nor the reverse.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return -1, fmt.Errorf("make mounts private: %w", err)
	}
	// The writable roots are cloned while still writable, then bound back
	// over the read-only tree.
	clones := make([]int, 0, len(pl.writable))
	defer func() {
		for _, fd := range clones {
			unix.Close(fd)
		}
	}()
	for _, w := range pl.writable {
		fd, err := unix.OpenTree(unix.AT_FDCWD, w, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return -1, fmt.Errorf("clone writable root %s: %w", w, err)
		}
		clones = append(clones, fd)
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NODEV}); err != nil {
			return -1, fmt.Errorf("writable root %s without devices: %w", w, err)
		}
	}
	tmpfds, err := pl.tmp.clone()
	if err != nil {
		return -1, err
	}
	defer closeAll(tmpfds)
	// So are the devices the command keeps, while they still work.
	devs := make([]int, len(devNodes))
	defer func() {
		for _, fd := range devs {
			if fd > 0 {
				unix.Close(fd)
			}
		}
	}()
	for i, name := range devNodes {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+name, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC)
		if err != nil {
			return -1, fmt.Errorf("clone /dev/%s: %w", name, err)
		}
		devs[i] = fd
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV}); err != nil {
		return -1, fmt.Errorf("make / read-only and without devices: %w", err)
	}
	for i, w := range pl.writable {
		if err := unix.MoveMount(clones[i], "", unix.AT_FDCWD, w, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return -1, fmt.Errorf("bind writable root %s back: %w", w, err)
		}
	}
	for _, d := range pl.pinned {
		if err := bindSelf(d, false); err != nil {
			return -1, fmt.Errorf("pin %s (on the way to a protected path): %w", d, err)
		}
	}
	for _, p := range pl.readOnly {
		if err := bindSelf(p, true); err != nil {
			return -1, fmt.Errorf("protect %s: %w", p, err)
		}
	}
	// After the roots and protected paths, before anything is cloned to
	// be mounted elsewhere (shown directories, what /tmp keeps): the
	// covers come along.
	if err := pl.coverSockets(); err != nil {
		return -1, err
	}
	var cgroups []string
	if !pl.keepCgroups {
		var err error
		if cgroups, err = cgroupMounts(); err != nil {
			return -1, err
		}
	}
	// What is shown inside a hidden directory (and the named unix sockets
	// there) is cloned before the cover; outer before inner.
	back := slices.SortedStableFunc(slices.Values(slices.Concat(pl.show, pl.reveal)), func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	shown := make([]int, 0, len(back))
	defer func() {
		for _, fd := range shown {
			unix.Close(fd)
		}
	}()
	for _, d := range back {
		fd, err := unix.OpenTree(unix.AT_FDCWD, d, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return -1, fmt.Errorf("clone shown directory %s: %w", d, err)
		}
		shown = append(shown, fd)
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return -1, fmt.Errorf("shown directory %s read-only: %w", d, err)
		}
	}
	for _, h := range cgroups {
		if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555"); err != nil {
			return -1, fmt.Errorf("hide %s: %w", h, err)
		}
	}
	for _, h := range pl.hide {
		if err := hideDir(h, back, shown); err != nil {
			return -1, fmt.Errorf("hide %s: %w", h, err)
		}
	}
	if err := pl.tmp.cover(tmpfds); err != nil {
		return -1, err
	}
	if err := newDev(devs); err != nil {
		return -1, fmt.Errorf("/dev: %w", err)
	}
	if err := pl.tmp.shm(tmpfds); err != nil {
		return -1, err
	}
	nsfd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the namespace: %w", err)
	}
	// The command's root: a copy of the whole tree, on the anchor.
	rootfd, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_RECURSIVE)
	if err == nil {
		err = unix.MoveMount(rootfd, "", unix.AT_FDCWD, chrootAnchor, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(rootfd)
	}
	if err != nil {
		unix.Close(nsfd)
		return -1, fmt.Errorf("mount the command's root on %s: %w", chrootAnchor, err)
	}
	return nsfd, nil
}

// hideDir covers h with an empty tmpfs, binds back the shown directories
// and named unix sockets inside it (show, their clones in fds) on
// directories or empty files made for them, then makes the tmpfs
// read-only.
func hideDir(h string, show []string, fds []int) error {
	if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=16k,mode=0555"); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	for i, d := range show {
		if d == h || !within(h, d) {
			continue
		}
		isDir, err := isDirFD(fds[i])
		if err != nil {
			return fmt.Errorf("show %s: %w", d, err)
		}
		dir := d
		if !isDir {
			dir = filepath.Dir(d)
		}
		if err := os.MkdirAll(dir, 0o555); err != nil {
			return fmt.Errorf("show %s: %w", d, err)
		}
		if !isDir {
			if err := os.WriteFile(d, nil, 0o444); err != nil {
				return fmt.Errorf("show %s: %w", d, err)
			}
		}
		if err := unix.MoveMount(fds[i], "", unix.AT_FDCWD, d, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("show %s: %w", d, err)
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, h, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("read-only: %w", err)
	}
	return nil
}

// devNodes are the devices a command's /dev holds: bound from the host's.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// newDev covers /dev with one holding only the devNodes (devs are their
// clones), the usual links, an empty shm and a devpts of its own: the
// command's terminals are its own (a PTY opens), the host's are not there
// (a terminal of the host's user could be read, or written to, as the
// user). It is read-only but for devpts.
func newDev(devs []int) error {
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	for i, name := range devNodes {
		path := "/dev/" + name
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o666)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		unix.Close(fd)
		if err := unix.MoveMount(devs[i], "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("bind %s: %w", path, err)
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
	}
	for link, target := range map[string]string{
		"/dev/ptmx": "pts/ptmx", "/dev/fd": "/proc/self/fd",
		"/dev/stdin": "/proc/self/fd/0", "/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2",
	} {
		if err := unix.Symlink(target, link); err != nil {
			return fmt.Errorf("%s: %w", link, err)
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/dev", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("read-only: %w", err)
	}
	return nil
}

// bindSelf mounts path (a file or a directory) on itself, read-only if ro.
func bindSelf(path string, ro bool) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("clone: %w", err)
	}
	defer unix.Close(fd)
	if ro {
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("make read-only: %w", err)
		}
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	return nil
}

// cgroupMounts are the mount points of every cgroup file system in the
// calling thread's namespace, deepest first (so hiding one never hides
// the next's mount point first).
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("find cgroup file systems: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source super
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		if t := fields[sep+1]; t == "cgroup" || t == "cgroup2" {
			out = append(out, unescapeMountinfo(fields[4]))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("find cgroup file systems: %w", err)
	}
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(out), nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// enter moves the calling thread into the namespaces, with its root at
// the command's copy of the tree and its working directory kept.
func (n *namespaces) enter(skip layers) error {
	if skip&layerIPCNS == 0 {
		if err := unix.Setns(n.ipc, unix.CLONE_NEWIPC); err != nil {
			return fmt.Errorf("ipc namespace: setns: %w", err)
		}
	}
	if n.net >= 0 && skip&layerNetNS == 0 {
		if err := unix.Setns(n.net, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("network namespace: setns: %w", err)
		}
	}
	if skip&layerMountNS != 0 {
		return nil
	}
	cwd, err := unix.Getwd()
	if err != nil {
		cwd = "/"
	}
	// setns into a mount namespace needs a file system context (root,
	// working directory) this thread does not share with the others.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("mount namespace: unshare the file system context: %w", err)
	}
	if err := unix.Setns(n.mnt, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("mount namespace: setns: %w", err)
	}
	if skip&layerChroot != 0 {
		return unix.Chdir(cwd)
	}
	if err := chrootIn(cwd); err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	return nil
}

// enterNew makes new namespaces of pl for the calling thread alone: what
// entering prepared ones is measured against.
func (pl *mountPlan) enterNew(network bool) error {
	if err := unix.Unshare(unix.CLONE_NEWIPC); err != nil {
		return fmt.Errorf("ipc namespace: %w", err)
	}
	if !network {
		fd, err := newNetNS()
		if err != nil {
			return fmt.Errorf("network namespace: %w", err)
		}
		unix.Close(fd)
	}
	cwd, err := unix.Getwd()
	if err != nil {
		cwd = "/"
	}
	fd, err := pl.build()
	if err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	unix.Close(fd)
	if err := chrootIn(cwd); err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	return nil
}

// chrootIn sets the calling thread's root to the command's copy of the
// tree, and its working directory to cwd there (setns and unshare left it
// outside), else to the root.
func chrootIn(cwd string) error {
	if err := unix.Chroot(chrootAnchor); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	if err := unix.Chdir(cwd); err != nil {
		if err := unix.Chdir("/"); err != nil {
			return fmt.Errorf("chdir /: %w", err)
		}
	}
	return nil
}

func (n *namespaces) close() error {
	var errs []error
	for _, fd := range []int{n.mnt, n.ipc, n.net} {
		if fd >= 0 {
			errs = append(errs, unix.Close(fd))
		}
	}
	return errors.Join(errs...)
}
