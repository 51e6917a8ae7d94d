package confine

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/sandbox"
)

// The in-process runner: a policy's restrictions are made ready once
// (Prepare) and applied to one locked OS thread per command (Confine), which
// then forks the command; no second exec. Its layers, in the order Confine
// applies them:
//
//  1. inherited descriptors: none but the command's stdio;
//  2. the policy's network namespace when the network is off (nothing but
//     its loopback, up; for a proxied policy, the host's proxy listening
//     on it: netbox.go), and its IPC namespace;
//  3. the policy's mount namespace (mountns_linux.go): everything
//     read-only but the writable roots, protected paths read-only inside
//     them, the host's runtime directory and cgroups hidden, in
//     workspace-write the owner's temporary folder on /tmp and /dev/shm
//     (tmp_linux.go), a /dev of its own and no device nodes elsewhere,
//     the command's root not the namespace's; when the policy names unix
//     sockets, the host's other sockets covered (socketsns_linux.go);
//  4. no new privileges;
//  5. Landlock: read everywhere, write only in the writable roots and the
//     terminal and null devices; no signals and no abstract unix sockets
//     to processes outside the command's domain;
//  6. capabilities: the bounding set dropped and SECBIT_NOROOT, so a
//     command run as root gains none at exec;
//  7. seccomp (seccomp_linux.go): a denylist for sockets that are not the
//     network's (unix sockets unless the policy names some), namespaces,
//     mounts, other processes and kernel surface.
//
// Each layer stands alone where it can: the probes in escape_linux_test.go
// say which hold what.

// The securebits of <linux/securebits.h>.
const (
	secbitNoRoot       = 1 << 0
	secbitNoRootLocked = 1 << 1
)

// landlockABI is the lowest Landlock ABI the runner runs on: 6 scopes
// signals and abstract unix sockets; 5 is the first that handles device
// ioctls (granted on the terminal devices so PTYs work inside). Never
// fewer, never best effort: on an older kernel Prepare fails.
const landlockABI = 6

// landlockConfig is what Landlock restricts: the file system rights of
// ABI 5 and 6, and the two IPC scopes. The network is the namespace's
// business: Landlock's TCP rules would also forbid a command its own
// loopback.
var landlockConfig = landlock.Config{
	HandledAccessFS: landlock.V6.HandledAccessFS,
	Scoped:          landlock.V6.Scoped,
}

// layers name the runner's layers, for tests that leave one out to show
// what it alone holds.
type layers uint

const (
	layerFDs         layers = 1 << iota // inherited descriptors marked close-on-exec
	layerNetNS                          // the network namespace
	layerIPCNS                          // the IPC namespace
	layerMountNS                        // the mount namespace
	layerChroot                         // the command's root not its namespace's
	layerHideCgroups                    // cgroup file systems hidden
	layerLandlock
	layerCaps
	layerSeccomp
)

// Confinement is one policy's restrictions, made ready once; Confine
// applies them to the calling OS thread (a subprocess Spec.Confine).
type Confinement struct {
	ruleset int // Landlock
	flags   uint32
	network bool
	ns      *namespaces
	filter  []unix.SockFilter
	// watched is what the namespace's paths were at Prepare (see Stale).
	watched []pathState
	// young are host sockets too young to be covered at Prepare, all
	// settled at settled; youngGone says none of them stayed.
	young     []pathState
	settled   time.Time
	youngGone atomic.Bool
	// planned is the mount namespace's plan; fresh makes new namespaces
	// of it per command instead of entering the prepared ones (only the
	// benchmark's comparison sets it: its devpts is not the ruleset's, so
	// no PTY opens there).
	planned *mountPlan
	fresh   bool
	skip    layers // none, but in tests
}

// Prepare makes the restrictions of mode under p ready: the Landlock
// ruleset, the namespaces, the seccomp program. Nothing is restricted
// yet; Close releases them. Protected paths and hidden directories that
// do not exist now are neither protected nor hidden: Stale says when that
// changed.
func Prepare(p *sandbox.Policy, mode string, opt Options) (*Confinement, error) {
	// A host socket to cover that goes away meanwhile (its owner removed
	// it) makes one try stale; the next lists the sockets again.
	for attempt := 1; ; attempt++ {
		c, err := prepare(p, mode, opt, 0)
		if !errors.Is(err, errChanged) || attempt == 3 {
			return c, err
		}
	}
}

// errChanged is a namespace found stale as soon as it was made.
var errChanged = errors.New("sandbox: protected paths or unix sockets changed while the sandbox was being prepared; prepare again")

// prepare is Prepare without the layers in skip.
func prepare(p *sandbox.Policy, mode string, opt Options, skip layers) (*Confinement, error) {
	var writable []string
	switch mode {
	case sandbox.ReadOnly:
	case sandbox.WorkspaceWrite:
		if p.WorkspaceRoot == "" {
			return nil, errors.New("sandbox: workspace-write without a workspace root")
		}
		writable = slices.Concat([]string{p.WorkspaceRoot}, p.WritableRoots, p.CacheRoots)
	case sandbox.DangerFullAccess:
		return nil, errors.New("sandbox: danger-full-access confines nothing: run it without a confinement")
	default:
		return nil, fmt.Errorf("sandbox: unknown mode %q", mode)
	}
	for _, w := range writable {
		if !filepath.IsAbs(w) || filepath.Clean(w) != w {
			return nil, fmt.Errorf("sandbox: writable root %q is not an absolute, clean path", w)
		}
	}
	writable = slices.Compact(slices.Sorted(slices.Values(writable)))
	abi, err := llsyscall.LandlockGetABIVersion()
	if err != nil {
		return nil, fmt.Errorf("sandbox: landlock is not available (the runner needs ABI %d): %w", landlockABI, err)
	}
	if abi < landlockABI {
		return nil, fmt.Errorf("sandbox: landlock: the runner needs ABI %d, this kernel has %d", landlockABI, abi)
	}
	// Named unix sockets: socket(AF_UNIX) is let through, the mount
	// namespace covers the host's other sockets (socketsns_linux.go).
	sockets := len(p.UnixSockets) > 0
	filter, err := seccompFilter(sockets)
	if err != nil {
		return nil, fmt.Errorf("sandbox: seccomp: %w", err)
	}
	// The host's read-only paths (its plugin binaries) are kept like the
	// policy's protected ones.
	plan, watched, err := planMounts(writable, slices.Concat(p.ProtectedPaths, opt.ReadOnly), opt.Hide, opt.Show)
	if err != nil {
		return nil, fmt.Errorf("sandbox: mount namespace: %w", err)
	}
	plan.keepCgroups = skip&layerHideCgroups != 0
	if sockets {
		if err := plan.planSockets(p.UnixSockets); err != nil {
			return nil, fmt.Errorf("sandbox: mount namespace: %w", err)
		}
	}
	tmpStates, err := plan.planTmp(opt.Tmp, mode)
	if err != nil {
		return nil, fmt.Errorf("sandbox: mount namespace: %w", err)
	}
	watched = append(watched, tmpStates...)
	if sockets {
		socketStates, err := plan.socketStates()
		if err != nil {
			return nil, fmt.Errorf("sandbox: mount namespace: %w", err)
		}
		watched = append(watched, socketStates...)
	}
	young, settled := plan.youngSockets()
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	}
	if len(writable) > 0 {
		rules = append(rules, landlock.RWDirs(writable...).WithRefer())
	}
	if plan.tmp != nil {
		rules = append(rules, plan.tmp.rule())
	}
	// The ruleset is made in the namespace: its devpts is not the host's.
	var fd int
	var flags uint32
	ns, err := buildNamespaces(plan, p.Network, func() (err error) {
		if fd, flags, err = landlockConfig.NewRulesetFD(rules...); err != nil {
			return fmt.Errorf("landlock (ABI %d): %w", landlockABI, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	c := &Confinement{ruleset: fd, flags: flags, network: p.Network, ns: ns, filter: filter, watched: watched, young: young, settled: settled, planned: plan, skip: skip}
	if c.Stale() {
		// A command of another confinement moved them meanwhile: what was
		// mounted may not be what was planned.
		c.Close()
		return nil, errChanged
	}
	return c, nil
}

// Close releases the ruleset and the namespaces (commands running in
// them keep them). No Confine may be under way: its descriptors would be
// gone, or another file's.
func (c *Confinement) Close() error {
	return errors.Join(unix.Close(c.ruleset), c.ns.close())
}

// Stale reports whether the paths the namespace was built from are no
// longer what it holds: a protected path or a hidden directory appeared
// or went, or one of them or a writable root was replaced (a rename over
// a protected file outside the sandbox detaches its mount in the
// namespace), or, when the policy names unix sockets, a socket covered
// or bound back was bound again or one too young to be covered has
// settled (socketsns_linux.go). The caller prepares again.
func (c *Confinement) Stale() bool {
	for _, was := range c.watched {
		now, _, err := stateOf(was.path)
		if err != nil || now != was {
			return true
		}
	}
	// A host socket too young to be covered at Prepare that is still
	// there once settled: the next namespace covers it.
	if len(c.young) > 0 && !c.youngGone.Load() && time.Now().After(c.settled) {
		for _, was := range c.young {
			if now, _, err := stateOf(was.path); err == nil && now == was {
				return true
			}
		}
		c.youngGone.Store(true)
	}
	return false
}

// Confine restricts the calling OS thread, which must be locked, must not
// be the main thread and is never used again (subprocess does all three).
func (c *Confinement) Confine() error {
	// Go opens every descriptor close-on-exec, but one inherited by the
	// host or made by a dup without it would reach the command: mark all
	// of them beyond stdio (process-wide, harmless to the host: os/exec
	// passes what it means to pass explicitly).
	if c.skip&layerFDs == 0 {
		if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
			return fmt.Errorf("descriptors: close-on-exec: %w", err)
		}
	}
	if c.fresh {
		if err := c.planned.enterNew(c.network); err != nil {
			return err
		}
	} else if err := c.ns.enter(c.skip); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if c.skip&layerLandlock == 0 {
		if err := llsyscall.LandlockRestrictSelf(c.ruleset, c.flags); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	// Root gains nothing at exec: keep effective capabilities on this
	// thread (setxid elsewhere in the process must not fail), drop the
	// bounding set.
	if c.skip&layerCaps == 0 {
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbitNoRoot|secbitNoRootLocked, 0, 0, 0); err != nil {
			return fmt.Errorf("capabilities: securebits: %w", err)
		}
		for capability := 0; capability <= unix.CAP_LAST_CAP; capability++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(capability), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("capabilities: drop %d: %w", capability, err)
			}
		}
	}
	// Last: the filter denies setns and mounts, which the layers above use.
	if c.skip&layerSeccomp == 0 {
		if err := installSeccomp(c.filter); err != nil {
			return fmt.Errorf("seccomp: %w", err)
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
