package confine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// The landlock runner's unix sockets at a path, when the policy names
// some (seccomp then lets socket(AF_UNIX) through): the mount namespace
// covers every other socket the host has bound for socketSettle
// (coveredSockets) with the null device on a read-only nodev mount, so
// connect() fails (ECONNREFUSED: not a socket) and open() too (EACCES).
// A cover inside a writable root is a mount point: the command can
// neither remove it nor rename anything over it (EBUSY). The named
// sockets are left as they are, and bound back where the namespace hides
// their place (a hidden directory, the host's /tmp behind the owner's
// folder), as the bubblewrap runner does.
//
// The namespace is made once per policy and kept, which bubblewrap's is
// not: a host service that removes its socket and binds it again (a
// restart) detaches the cover in the namespace (the kernel lazily
// unmounts what was mounted on a removed file in other namespaces), and a
// named socket bound back holds the file it was made with. Each of those
// paths is watched (Stale), so the next command gets a namespace made
// again; so does a socket too young to be covered when it was made, once
// it has settled (as bubblewrap covers it from then on). What neither
// runner covers: sockets bound less than socketSettle before a command's
// namespace was made (for this runner: the namespace the command gets,
// maybe made for an earlier one), or after it.

// planSockets plans the covers and bind-backs for a policy naming the
// unix sockets named (absolute, clean: sockets or directories holding
// them), after planMounts.
func (pl *mountPlan) planSockets(named []string) error {
	allowed, err := existing("unix socket", named)
	if err != nil {
		return err
	}
	covers, young, err := coveredSockets(allowed)
	if err != nil {
		return err
	}
	hidden := func(s string) bool { return under(pl.hide, s) && !under(pl.show, s) }
	pl.covers = slices.DeleteFunc(covers, hidden)
	pl.young = slices.DeleteFunc(young, hidden)
	pl.named, pl.allowed = slices.Clone(named), allowed
	var reveal []string
	for _, a := range allowed {
		if slices.ContainsFunc(pl.hide, func(h string) bool { return a != h && within(h, a) }) && !under(pl.show, a) {
			reveal = append(reveal, a)
		}
	}
	pl.reveal = outermost(sortedSet(reveal))
	return nil
}

// socketStates are the states of what the socket plan mounts on or binds
// back, for Stale (after planTmp, which may leave covers out): a change
// there means the namespace no longer holds what was planned.
func (pl *mountPlan) socketStates() ([]pathState, error) {
	var states []pathState
	add := func(kind string, paths []string) error {
		for _, p := range paths {
			st, _, err := stateOf(p)
			if err != nil {
				return fmt.Errorf("%s %w", kind, err)
			}
			states = append(states, st)
		}
		return nil
	}
	if err := add("covered unix socket", pl.covers); err != nil {
		return nil, err
	}
	if err := add("unix socket", pl.reveal); err != nil {
		return nil, err
	}
	// A named socket bound back, or one that does not exist yet where it
	// would be.
	var named []string
	for _, n := range slices.Concat(pl.named, pl.allowed) {
		if under(pl.hide, n) || (pl.tmp != nil && within(tmpDir, n)) {
			named = append(named, n)
		}
	}
	if err := add("unix socket", sortedSet(named)); err != nil {
		return nil, err
	}
	return states, nil
}

// youngSockets are the states of the sockets to cover once settled, and
// when the last of them will be (see Confinement.Stale); none, zero.
func (pl *mountPlan) youngSockets() ([]pathState, time.Time) {
	var states []pathState
	for _, s := range pl.young {
		if st, _, err := stateOf(s); err == nil && st.exists {
			states = append(states, st)
		}
	}
	if len(states) == 0 {
		return nil, time.Time{}
	}
	return states, time.Now().Add(socketSettle)
}

// coverSockets mounts the null device on each socket to cover: a clone
// of the host's /dev/null (before newDev replaces it), read-only, without
// devices.
func (pl *mountPlan) coverSockets() error {
	for _, s := range pl.covers {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/null", unix.OPEN_TREE_CLONE|unix.O_CLOEXEC)
		if err != nil {
			return fmt.Errorf("cover unix socket %s: clone /dev/null: %w", s, err)
		}
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC})
		if err == nil {
			// Not through a symlink at the end (no MOVE_MOUNT_T_SYMLINKS).
			err = unix.MoveMount(fd, "", unix.AT_FDCWD, s, unix.MOVE_MOUNT_F_EMPTY_PATH)
		}
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) {
			continue // gone meanwhile: Stale says so
		}
		if err != nil {
			return fmt.Errorf("cover unix socket %s: %w", s, err)
		}
	}
	return nil
}

// emptyFileAt makes the empty regular file name in the directory dir (an
// O_PATH descriptor), a mount point for a unix socket bound back: what is
// there of another kind is removed first, never followed (the owner's
// commands may have put anything there).
func emptyFileAt(dir int, name string) error {
	for attempt := 0; ; attempt++ {
		fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
			return nil
		}
		if attempt > 0 || !(errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENXIO)) {
			return fmt.Errorf("make %s: %w", name, err)
		}
		flags := 0
		if errors.Is(err, unix.EISDIR) {
			flags = unix.AT_REMOVEDIR
		}
		if err := unix.Unlinkat(dir, name, flags); err != nil {
			return fmt.Errorf("remove %s (in the way): %w", name, err)
		}
	}
}

// isDirFD reports whether the clone fd's root is a directory.
func isDirFD(fd int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}
