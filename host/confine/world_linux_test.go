package confine

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/testneeds"
)

// world is what stands for the host around every fixture: listeners on
// its loopback, a unix socket, a signal counter, the probe module.
type world struct {
	t            *testing.T
	m, noCgroups *procs.Manager
	py, dir      string
	cgroot       string // the cgroup2 mount
	disk         string // the block device of /, if found
	diskDev      uint64
	tcp4, tcp6   *counter
	udp4         *counter
	unixPath     *counter
	abstract     *counter
	sockPath     string
	abstractName string
	usr2         atomic.Int64
}

// counter counts what a host-side listener received.
type counter struct {
	n    atomic.Int64
	port int
}

func (c *counter) count() int64 { return c.n.Load() }

// waitChange reports whether c moved from base within d.
func (c *counter) waitChange(base int64, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if c.count() != base {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func python() string {
	// The distribution's interpreter: a version manager's shim is a shell
	// script that takes long to start.
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	if p, err := exec.LookPath("python3"); err == nil {
		return p
	}
	return ""
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, py: python(), dir: t.TempDir()}
	if w.py == "" {
		t.Skipf("no python3 (%s): the probes are written in it", testneeds.Install("python3"))
	}
	var err error
	if w.m, err = procs.New(procs.Config{SpillDir: filepath.Join(t.TempDir(), "spill")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.m.Close(t.Context()) })
	if w.noCgroups, err = procs.New(procs.Config{SpillDir: filepath.Join(t.TempDir(), "spill"), NoCgroup: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.noCgroups.Close(t.Context()) })
	if !w.m.Cgroups() {
		t.Skip("no per-command cgroups here: the tree probes need them")
	}
	w.cgroot = cgroup2Mount()
	w.disk, w.diskDev = rootDisk()
	if err := os.WriteFile(filepath.Join(w.dir, "probe.py"), []byte(probeModule), 0o644); err != nil {
		t.Fatal(err)
	}
	w.tcp4 = w.listenTCP("tcp4", "127.0.0.1:0")
	w.tcp6 = w.listenTCP("tcp6", "[::1]:0")
	w.udp4 = w.listenUDP()
	w.sockPath = filepath.Join(w.dir, "host.sock")
	w.unixPath = w.listenUnix(w.sockPath)
	w.abstractName = fmt.Sprintf("dsh-probe-%d-%s", os.Getpid(), randHex(4))
	w.abstract = w.listenUnix("@" + w.abstractName)
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, syscall.SIGUSR2)
	go func() {
		for range sig {
			w.usr2.Add(1)
		}
	}()
	t.Cleanup(func() { signal.Stop(sig) })
	return w
}

func (w *world) listenTCP(network, addr string) *counter {
	lis, err := net.Listen(network, addr)
	if err != nil {
		w.t.Fatalf("listen %s: %v", addr, err)
	}
	w.t.Cleanup(func() { lis.Close() })
	c := &counter{port: lis.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	return c
}

// listenUDP counts datagrams and answers each, so a sender can tell it
// got through.
func (w *world) listenUDP() *counter {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { pc.Close() })
	c := &counter{port: pc.LocalAddr().(*net.UDPAddr).Port}
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c.n.Add(1)
			_, _ = pc.WriteTo([]byte("ack"), from)
		}
	}()
	return c
}

func (w *world) listenUnix(addr string) *counter {
	lis, err := net.Listen("unix", addr)
	if err != nil {
		w.t.Fatalf("listen %s: %v", addr, err)
	}
	w.t.Cleanup(func() { lis.Close() })
	c := &counter{}
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	return c
}

func cgroup2Mount() string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" {
				return f[4]
			}
		}
	}
	return ""
}

// readable says why root cannot read path here, if it cannot.
func readable(path string) func(*world) string {
	return func(*world) string {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Sprintf("root itself cannot read %s here (%v)", path, err)
		}
		f.Close()
		return ""
	}
}

// diskReadable says why root cannot read the disk here, if it cannot.
func diskReadable(w *world) string {
	if w.disk == "" {
		return "the block device of / was not found"
	}
	f, err := os.Open(w.disk)
	if err != nil {
		return fmt.Sprintf("root itself cannot read the disk here (%v)", err)
	}
	f.Close()
	return ""
}

// rootDisk is the device node of the block device / is on.
func rootDisk() (string, uint64) {
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err != nil {
		return "", 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/uevent", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return "", 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "DEVNAME="); ok {
			return "/dev/" + name, st.Dev
		}
	}
	return "", 0
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// probeModule is the probes' Python: raw syscalls through ctypes, numbers
// from the environment (they differ between architectures).
const probeModule = `
import ctypes, os, socket, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
E = os.environ

def check(r):
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r

def sys_(name, *args):
    return check(libc.syscall(ctypes.c_long(int(E["NR_" + name])), *args))

def clone3(flags, cgroup=0, child=None):
    args = (ctypes.c_uint64 * 11)()
    args[0] = flags
    args[4] = 17  # SIGCHLD
    args[10] = cgroup
    pid = sys_("CLONE3", ctypes.byref(args), ctypes.c_size_t(88))
    if pid == 0:
        if child:
            child()
        os._exit(0)
    return pid

def clone3_newuser():
    pid = clone3(0x10000000)
    os.waitpid(pid, 0)
    print("ESCAPED")

def clone3_cgroup():
    fd = os.open(E["CGROOT"], os.O_RDONLY | os.O_DIRECTORY)
    clone3(0x200000000, fd, lambda: os.execv("/bin/sleep", ["sleep", E["MARK"]]))
    print("ESCAPED")

def unshare_user():
    check(libc.unshare(0x10000000))
    print("ESCAPED")

def setns_host():
    fd = os.open("/proc/%s/ns/mnt" % E["SLEEPER"], os.O_RDONLY)
    check(libc.setns(fd, 0x20000))
    print("ESCAPED")

def io_uring():
    params = ctypes.create_string_buffer(120)
    sys_("IO_URING_SETUP", 4, params)
    print("ESCAPED")

def bpf():
    attr = ctypes.create_string_buffer(struct.pack("<IIII", 2, 4, 4, 1), 128)  # an array map
    sys_("BPF", 0, attr, 128)
    print("ESCAPED")

def perf():
    # A software clock, user space only: what perf_event_paranoid 2 leaves
    # to anyone.
    attr = ctypes.create_string_buffer(struct.pack("<IIQQQQQ", 1, 128, 0, 0, 0, 0, (1 << 5) | (1 << 6)), 128)
    sys_("PERF_EVENT_OPEN", attr, 0, -1, -1, 0)
    print("ESCAPED")

def userfaultfd():
    sys_("USERFAULTFD", os.O_CLOEXEC | 1)  # UFFD_USER_MODE_ONLY
    print("ESCAPED")

def add_key():
    sys_("ADD_KEY", b"user", E["KEYDESC"].encode(), b"x", 1, -4)  # the user keyring
    print("ESCAPED")

def caps():
    held = [l.strip() for l in open("/proc/self/status") if l.startswith("Cap") and int(l.split(":")[1], 16) != 0]
    if not held:
        sys.exit("no capabilities")
    print("ESCAPED", held)

def sethostname():
    socket.sethostname(socket.gethostname())
    print("ESCAPED")

def ptrace_kill():
    pid = int(E["SLEEPER"])
    libc.ptrace.restype = ctypes.c_long
    check(libc.ptrace(ctypes.c_long(16), pid, None, None))  # PTRACE_ATTACH
    os.waitpid(pid, 0x40000000)  # __WALL
    check(libc.ptrace(ctypes.c_long(8), pid, None, None))  # PTRACE_KILL
    print("ESCAPED")

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def vm_read():
    pid = int(E["SLEEPER"])
    for line in open("/proc/%d/maps" % pid):
        if line.rstrip().endswith("[stack]"):
            lo, hi = [int(x, 16) for x in line.split()[0].split("-")]
    n = hi - lo
    buf = ctypes.create_string_buffer(n)
    local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), n), iovec(lo, n)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    check(libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    secret = E["SECRET_MEM"].encode()
    if secret in buf.raw:
        print(secret.decode())

def shm():
    libc.shmat.restype = ctypes.c_void_p
    shmid = check(libc.shmget(int(E["SHMKEY"]), 0, 0))
    addr = libc.shmat(shmid, None, 0o10000)  # SHM_RDONLY
    if addr in (None, ctypes.c_void_p(-1).value):
        check(-1)
    print(ctypes.string_at(addr, 64).split(b"\0")[0].decode())

def tcp6():
    socket.create_connection(("::1", int(E["TCP6"])), timeout=2)
    print("ESCAPED")

def mptcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
    s.settimeout(2)
    s.connect(("127.0.0.1", int(E["TCP4"])))
    print("ESCAPED")

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    s.sendto(b"probe", ("127.0.0.1", int(E["UDP4"])))
    s.recv(16)
    print("ESCAPED")

def raw():
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    payload = b"raw"
    header = struct.pack("!HHHH", 40000, int(E["UDP4"]), 8 + len(payload), 0)
    s.sendto(header + payload, ("127.0.0.1", 0))
    print("ESCAPED")

def unix_path():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(E["SOCK"])
    print("ESCAPED")

def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + E["ABSTRACT"])
    print("ESCAPED")
`
