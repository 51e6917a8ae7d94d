package confine

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp layer: a denylist (an allowlist would have to follow every
// tool's syscalls), as a classic BPF program installed on the command's
// thread only (no TSYNC), so the command inherits it and nothing else in
// the host does.
//
// What it refuses with EPERM:
//   - socket families but unix, IPv4, IPv6 and netlink's routing protocol,
//     and raw or packet sockets of IPv4/IPv6. IPv4 and IPv6 stay: with the
//     network off, the command's network namespace holds nothing but its
//     own loopback, which it may serve itself on; seccomp cannot tell a
//     loopback address from another (it sees no sockaddr).
//   - unix sockets (socket(AF_UNIX)) when the policy names none: one at a
//     path reaches host services whatever the network (a container
//     engine's socket, the system bus). When it names some, socket(AF_UNIX)
//     is let through and the mount namespace covers the host's other
//     sockets instead (sockets_linux.go, socketsns_linux.go): Landlock
//     tells socket paths apart only from ABI 9 (resolve_unix).
//     socketpair(AF_UNIX) stays allowed: an unnamed pair reaches nothing
//     but itself, like a pipe. Abstract unix sockets are also scoped by
//     Landlock (ABI 6) and by the network namespace.
//   - clone and unshare with namespace flags, setns, and every mount call:
//     the mount namespace must stay as built.
//   - ptrace, process_vm_readv/writev, pidfd_getfd, io_uring, bpf,
//     perf_event_open, the key syscalls, userfaultfd, open_by_handle_at,
//     chroot, module and kexec loading, swap, reboot, acct, quotactl,
//     sethostname, setdomainname: other processes' memory and descriptors,
//     kernel attack surface, or what the dropped capabilities forbid anyway.
//
// clone3 is let through, unlike clone: Go forks the command with clone3
// (CLONE_INTO_CGROUP) from this very thread after the filter is on, and a
// filter cannot tell that call from the command's (it sees a pointer, not
// the flags). Answering clone3 from a supervisor goroutine (a seccomp user
// notification) deadlocks: Go's fork holds its P through the raw syscall,
// so with no other P free (GOMAXPROCS=1, concurrent forks) or during a
// stop-the-world the supervisor never runs (seen here with GOMAXPROCS=1).
// What clone3 could add is closed elsewhere: new namespaces need
// capabilities (dropped), or a user namespace, which the kernel refuses to
// a process whose root is not its mount namespace's root (see
// mountns_linux.go); and no cgroup can be named to CLONE_INTO_CGROUP, since
// every cgroup file system is hidden.
//
// Syscalls of another architecture (i386 through int 0x80, x32) would pass
// every number check: a foreign architecture kills the process, x32
// numbers fail with ENOSYS.

// auditArch is the AUDIT_ARCH_* value seccomp reports for this build's
// native syscalls; 0 where the filter has not been written.
var auditArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}[runtime.GOARCH]

// x32SyscallBit marks x32 syscall numbers on amd64.
const x32SyscallBit = 0x40000000

// nsFlags are clone's and unshare's namespace flags (CLONE_NEWTIME, 0x80,
// only for unshare: in clone's flags that bit is part of the exit signal).
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// seccompData offsets: nr, arch, instruction pointer, then six 64-bit
// arguments (the low word first on the little-endian architectures above).
const (
	offNr   = 0
	offArch = 4
)

func offArg(i int) uint32 { return 16 + 8*uint32(i) }

// deniedSyscalls fail with EPERM whatever their arguments.
var deniedSyscalls = []uint32{
	unix.SYS_SETNS,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR, unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_OPEN_BY_HANDLE_AT,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_ACCT, unix.SYS_QUOTACTL,
	unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME,
}

// filterPrologue starts a program: another architecture's calls are
// killed, x32's refused, and the syscall number is loaded.
func filterPrologue() (*bpfAsm, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	var a bpfAsm
	a.load(offArch)
	a.jeq(auditArch, "", "kill")
	a.load(offNr)
	if runtime.GOARCH == "amd64" {
		a.jge(x32SyscallBit, "enosys", "")
	}
	return &a, nil
}

// seccompFilter is the program; unixSockets lets socket(AF_UNIX) through
// (the policy names sockets the command may reach).
func seccompFilter(unixSockets bool) ([]unix.SockFilter, error) {
	a, err := filterPrologue()
	if err != nil {
		return nil, err
	}
	cases := map[uint32]string{
		unix.SYS_SOCKET:     "socket",
		unix.SYS_SOCKETPAIR: "socketpair",
		unix.SYS_CLONE:      "clone",
		unix.SYS_UNSHARE:    "unshare",
	}
	for _, nr := range deniedSyscalls {
		cases[nr] = "eperm"
	}
	a.dispatch(cases)

	a.label("socket")
	a.load(offArg(0))
	if unixSockets {
		a.jeq(unix.AF_UNIX, "allow", "")
	}
	a.jeq(unix.AF_INET, "inet", "")
	a.jeq(unix.AF_INET6, "inet", "")
	a.jeq(unix.AF_NETLINK, "netlink", "")
	a.jump("eperm")
	a.label("inet")
	a.load(offArg(1))
	a.and(0xf) // the type without SOCK_NONBLOCK, SOCK_CLOEXEC
	a.jeq(unix.SOCK_RAW, "eperm", "")
	a.jeq(unix.SOCK_PACKET, "eperm", "allow")
	a.label("netlink")
	a.load(offArg(2))
	a.jeq(unix.NETLINK_ROUTE, "allow", "eperm")

	a.label("socketpair")
	a.load(offArg(0))
	a.jeq(unix.AF_UNIX, "allow", "eperm")

	a.label("clone")
	a.load(offArg(0))
	a.jset(nsFlags, "eperm", "allow")
	a.label("unshare")
	a.load(offArg(0))
	a.jset(nsFlags|unix.CLONE_NEWTIME, "eperm", "allow")

	a.label("allow")
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.label("eperm")
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.label("enosys")
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	a.label("kill")
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	return a.assemble()
}

// installSeccomp puts prog on the calling thread (no_new_privs must be set).
func installSeccomp(prog []unix.SockFilter) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return err
	}
	runtime.KeepAlive(prog)
	return nil
}

// bpfAsm assembles a classic BPF program with forward jumps to labels.
type bpfAsm struct {
	ins    []unix.SockFilter
	jumps  []bpfJump
	labels map[string]int
}

type bpfJump struct {
	at     int
	jt, jf string // "" is the next instruction
	always bool   // an unconditional jump to jt
}

func (a *bpfAsm) load(off uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

func (a *bpfAsm) and(k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: k})
}

func (a *bpfAsm) ret(k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k})
}

func (a *bpfAsm) cond(op uint16, k uint32, jt, jf string) {
	a.jumps = append(a.jumps, bpfJump{at: len(a.ins), jt: jt, jf: jf})
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (a *bpfAsm) jeq(k uint32, jt, jf string)  { a.cond(unix.BPF_JEQ, k, jt, jf) }
func (a *bpfAsm) jge(k uint32, jt, jf string)  { a.cond(unix.BPF_JGE, k, jt, jf) }
func (a *bpfAsm) jset(k uint32, jt, jf string) { a.cond(unix.BPF_JSET, k, jt, jf) }

func (a *bpfAsm) jump(to string) {
	a.jumps = append(a.jumps, bpfJump{at: len(a.ins), jt: to, always: true})
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA})
}

// dispatch jumps on the syscall number (loaded) to the label of its case,
// and to "allow" for any other, through a binary search: the kernel
// evaluates the filter for every syscall number when it is installed (its
// action cache), so a linear chain of comparisons costs per command.
func (a *bpfAsm) dispatch(cases map[uint32]string) {
	nrs := slices.Sorted(maps.Keys(cases))
	var tree func(nrs []uint32)
	tree = func(nrs []uint32) {
		if len(nrs) <= 3 {
			for _, nr := range nrs {
				a.jeq(nr, cases[nr], "")
			}
			a.jump("allow")
			return
		}
		mid := len(nrs) / 2
		right := fmt.Sprintf("nr>=%d", nrs[mid])
		a.jge(nrs[mid], right, "")
		tree(nrs[:mid])
		a.label(right)
		tree(nrs[mid:])
	}
	tree(nrs)
}

func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.ins)
}

func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	target := func(at int, name string) (int, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := a.labels[name]
		if !ok || to <= at {
			return 0, fmt.Errorf("seccomp filter: no forward label %q", name)
		}
		return to - at - 1, nil
	}
	for _, j := range a.jumps {
		jt, err := target(j.at, j.jt)
		if err != nil {
			return nil, err
		}
		if j.always {
			a.ins[j.at].K = uint32(jt)
			continue
		}
		jf, err := target(j.at, j.jf)
		if err != nil {
			return nil, err
		}
		if jt > 255 || jf > 255 {
			return nil, fmt.Errorf("seccomp filter: a jump from %d is too long", j.at)
		}
		a.ins[j.at].Jt, a.ins[j.at].Jf = uint8(jt), uint8(jf)
	}
	if len(a.ins) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp filter: %d instructions", len(a.ins))
	}
	return a.ins, nil
}

// unixSocketFilter is the bubblewrap runner's program: socket(AF_UNIX)
// fails with EPERM, as in seccompFilter, and nothing else is touched
// (bwrap itself mounts, unshares and sets up its loopback under it).
// bwrap makes no unix socket of its own; socketpair stays open, for bwrap
// and for the pipes of the programs inside.
func unixSocketFilter() ([]unix.SockFilter, error) {
	a, err := filterPrologue()
	if err != nil {
		return nil, err
	}
	a.jeq(unix.SYS_SOCKET, "", "allow")
	a.load(offArg(0))
	a.jeq(unix.AF_UNIX, "eperm", "allow")
	a.label("allow")
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.label("eperm")
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.label("enosys")
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	a.label("kill")
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	return a.assemble()
}

// socketRule is the bubblewrap runner's confinement: the thread that
// forks bwrap gets unixSocketFilter, which bwrap and everything it runs
// inherit and cannot remove. bwrap could read the program from a
// descriptor (--seccomp FD), but the spawner passes none beyond stdio;
// on the forking thread the filter holds all the same, from before bwrap
// starts. no_new_privs comes with it (bwrap sets it anyway).
type socketRule struct{ filter []unix.SockFilter }

func newSocketRule() (confinement, error) {
	f, err := unixSocketFilter()
	if err != nil {
		return nil, err
	}
	return &socketRule{filter: f}, nil
}

func (s *socketRule) Confine() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := installSeccomp(s.filter); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

func (s *socketRule) Stale() bool  { return false }
func (s *socketRule) Close() error { return nil }
