package sandbox

import (
	"errors"
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/sandbox"
)

// The securebits of <linux/securebits.h>.
const (
	secbitNoRoot       = 1 << 0
	secbitNoRootLocked = 1 << 1
)

// landlockFS is what Landlock restricts: the file system rights of ABI 5,
// never fewer (ABI 5 is the first that handles device ioctls, granted on
// the terminal devices below so PTYs work inside). The network is the
// namespace's business: Landlock's TCP rules would also forbid a command
// its own loopback.
var landlockFS = landlock.Config{HandledAccessFS: landlock.V5.HandledAccessFS}

// Confinement is one policy's restrictions, made ready once; Confine
// applies them to the calling OS thread (a subprocess Spec.Confine).
//
// What it does today, on that thread: a network namespace of its own when
// the network is off (nothing but its own loopback, up); no new
// privileges; Landlock with read everywhere and write only in the mode's
// writable roots and the terminal and null devices; every capability
// dropped from the bounding set, with SECBIT_NOROOT so a command run as
// root gains none at exec. Not yet: the mount namespace that keeps
// protected paths read-only inside writable roots, seccomp, unix-socket
// rules (see the README's threat model).
type Confinement struct {
	fd      int
	flags   uint32
	network bool
}

// Prepare builds the Landlock ruleset of mode under p. Nothing is
// restricted yet; Close releases it.
func Prepare(p *sandbox.Policy, mode string) (*Confinement, error) {
	var writable []string
	switch mode {
	case sandbox.ReadOnly:
	case sandbox.WorkspaceWrite:
		writable = append([]string{p.WorkspaceRoot}, p.WritableRoots...)
	case sandbox.DangerFullAccess:
		return nil, errors.New("danger-full-access confines nothing: run it without a confinement")
	default:
		return nil, fmt.Errorf("unknown sandbox mode %q", mode)
	}
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	}
	if len(writable) > 0 {
		rules = append(rules, landlock.RWDirs(writable...).WithRefer())
	}
	fd, flags, err := landlockFS.NewRulesetFD(rules...)
	if err != nil {
		return nil, fmt.Errorf("landlock (ABI %d) is not available: %w", 5, err)
	}
	return &Confinement{fd: fd, flags: flags, network: p.Network}, nil
}

// Close releases the ruleset.
func (c *Confinement) Close() error { return unix.Close(c.fd) }

// Confine restricts the calling OS thread, which must be locked and must
// not be the main thread (subprocess does both).
func (c *Confinement) Confine() error {
	if !c.network {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("a network namespace: %w", err)
		}
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("the loopback of the network namespace: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsyscall.LandlockRestrictSelf(c.fd, c.flags); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	// Root gains nothing at exec: keep effective capabilities on this
	// thread (setxid elsewhere in the process must not fail), drop the
	// bounding set.
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbitNoRoot|secbitNoRootLocked, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	for capability := 0; capability <= unix.CAP_LAST_CAP; capability++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(capability), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", capability, err)
		}
	}
	return nil
}

// loopbackUp brings up "lo" in the calling thread's network namespace, so
// a command can still serve and reach itself on 127.0.0.1 and ::1.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
