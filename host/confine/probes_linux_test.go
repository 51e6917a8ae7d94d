package confine

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
)

// The escape probes: each is a bash script that exits 0 when it gets
// through, and a check that the world around the command (files outside
// the roots, protected paths, the host's processes, sockets and keys) is as
// it was. Each runs twice, on fresh fixtures: unconfined, where it must get
// through and change the world (else it proves nothing), then confined,
// where it must fail, say why (a denial in its output) and change nothing.

// escapeProbe is one escape attempt.
type escapeProbe struct {
	name   string
	script string
	tool   string // a program it needs besides bash, coreutils and python3
	// needs says why the probe cannot escape here even unconfined ("" if
	// it can), so it is skipped rather than failed.
	needs func(w *world) string
	// denial matches the confined run's output (stdout and stderr); empty
	// means defaultDenial, "-" means the exit status alone (the unconfined
	// run shows the script works).
	denial string
	// held adds a check of its own to the fixture's snapshot: nil when
	// nothing outside changed.
	held func(f *fixture, r procs.Result) error
	// treeEscape: the escape is outliving the command, which only a
	// manager without cgroups shows unconfined.
	treeEscape bool
}

var defaultDenial = `(?i)permission denied|operation not permitted|read-only file system|resource busy|cross-device|refused|unreachable|timed out|function not implemented`

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

// fixture is one run's world: fresh directories and host-side processes.
type fixture struct {
	w                  *world
	ws, out, run, plug string
	protected          []string // what the policy protects
	readOnly           []string // what the host keeps read-only (its plugin binaries)
	shown              string   // the owner's spill directory, inside the runtime one
	otherSpill         string   // another owner's spill file
	token              string   // in run/token
	secret             string   // in the sleeper's environment
	sleeper            *exec.Cmd
	sleeperDone        chan struct{}
	fd                 int    // a descriptor the host leaked: no close-on-exec
	tokenFD            int    // the host's descriptor of the token
	pty                int    // the master of a terminal of the host's
	ptyN               int    // its number under /dev/pts
	typed              string // what the host's user typed on it
	shmKey             int    // a System V shared memory segment of the host's
	shmSecret          string // in it
	mark               string // a sleep duration naming survivors
	key                string // a key description in the user keyring
	before             map[string]string
	base               map[*counter]int64
	usr2               int64
}

var marks atomic.Int64

func (w *world) fixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{
		w:     w,
		ws:    filepath.Join(root, "ws"),
		out:   filepath.Join(root, "outside"),
		run:   filepath.Join(root, "runtime"),
		plug:  filepath.Join(root, "plugins"),
		token: "tok-" + randHex(8),
		mark:  strconv.FormatInt(4_000_000+int64(os.Getpid()%1000)*1000+marks.Add(1), 10),
		key:   "dsh-probe-" + randHex(6),
	}
	f.secret = "mem-" + randHex(8)
	for _, d := range []string{f.ws, f.out, f.run, f.plug, filepath.Join(f.ws, "m")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	git := exec.Command("git", "init", "-q", f.ws)
	if out, err := git.CombinedOutput(); err != nil {
		// Without git, a repository's shape is enough for the probes.
		must(t, os.MkdirAll(filepath.Join(f.ws, ".git", "hooks"), 0o755))
		must(t, os.WriteFile(filepath.Join(f.ws, ".git", "config"), []byte("[core]\n"), 0o644))
		t.Logf("git init: %v %s", err, out)
	}
	must(t, os.WriteFile(filepath.Join(f.ws, ".git", "hooks", "README"), []byte("hooks\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(f.ws, ".claude"), 0o755))
	must(t, os.WriteFile(filepath.Join(f.ws, ".claude", "settings.json"), []byte("{}\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.ws, "dsh.yaml"), []byte("plugins: {}\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.out, "orig"), []byte("orig\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.out, "fd-target"), nil, 0o644))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, os.Chtimes(filepath.Join(f.out, "orig"), old, old))
	must(t, os.WriteFile(filepath.Join(f.run, "token"), []byte(f.token+"\n"), 0o600))
	f.shown = filepath.Join(f.run, "spill", "probe")
	must(t, os.MkdirAll(f.shown, 0o700))
	must(t, os.WriteFile(filepath.Join(f.shown, "stdout-1"), []byte("spilled\n"), 0o600))
	f.otherSpill = filepath.Join(f.run, "spill", "other", "stdout-1")
	must(t, os.MkdirAll(filepath.Dir(f.otherSpill), 0o700))
	must(t, os.WriteFile(f.otherSpill, []byte(f.token+" of another session\n"), 0o600))
	must(t, os.MkdirAll(filepath.Join(f.ws, "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(f.ws, "bin", "dsh-y"), []byte("#!/bin/sh\necho plugin\n"), 0o755))
	f.readOnly = []string{filepath.Join(f.ws, "bin", "dsh-y")}
	must(t, os.WriteFile(filepath.Join(f.plug, "dsh-x"), []byte("#!/bin/sh\necho plugin\n"), 0o755))
	f.protected = []string{
		filepath.Join(f.ws, ".git", "config"), filepath.Join(f.ws, ".git", "hooks"),
		filepath.Join(f.ws, ".claude"), filepath.Join(f.ws, ".codex"), filepath.Join(f.ws, "dsh.yaml"),
	}

	f.sleeper = exec.Command("sleep", "300")
	f.sleeper.Env = append(os.Environ(), "DSH_PROBE_MEM="+f.secret)
	must(t, f.sleeper.Start())
	f.sleeperDone = make(chan struct{})
	go func() { _ = f.sleeper.Wait(); close(f.sleeperDone) }()
	t.Cleanup(func() { _ = f.sleeper.Process.Kill(); <-f.sleeperDone })

	fd, err := unix.Open(filepath.Join(f.out, "fd-target"), unix.O_WRONLY|unix.O_APPEND, 0)
	must(t, err)
	f.fd = fd
	t.Cleanup(func() { unix.Close(fd) })
	tfd, err := unix.Open(filepath.Join(f.run, "token"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	must(t, err)
	f.tokenFD = tfd
	t.Cleanup(func() { unix.Close(tfd) })
	f.pty, f.ptyN = hostPTY(t)
	f.typed = "typed-" + randHex(6)
	_, err = unix.Write(f.pty, []byte(f.typed+"\n"))
	must(t, err)
	if w.disk != "" {
		must(t, unix.Mknod(filepath.Join(f.ws, "disk"), unix.S_IFBLK|0o600, int(w.diskDev)))
	}
	must(t, unix.Mknod(filepath.Join(f.ws, "urandom"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 9))))
	f.shmKey, f.shmSecret = hostShm(t)
	t.Cleanup(func() {
		_ = unix.Unmount(filepath.Join(f.ws, "m"), unix.MNT_DETACH)
		_ = os.Remove("/tmp/dsh-probe-" + f.mark)
		if id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", f.key, 0); err == nil {
			_, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0)
		}
		killMatching("sleep " + f.mark)
	})
	f.before = f.snapshot()
	f.base = map[*counter]int64{}
	for _, c := range []*counter{w.tcp4, w.tcp6, w.udp4, w.unixPath, w.abstract} {
		f.base[c] = c.count()
	}
	f.usr2 = w.usr2.Load()
	return f
}

// hostPTY opens a terminal as the host's user would have one: its master
// (which sees what the terminal shows) and the number of its slave.
func hostPTY(t *testing.T) (int, int) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(m) })
	must(t, unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	must(t, err)
	// Held open, so what is written to it waits in its queues.
	s, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(s) })
	return m, n
}

// hostShm makes a System V shared memory segment, root's and private to
// it (mode 0600), holding a secret, as a host daemon's would.
func hostShm(t *testing.T) (int, string) {
	t.Helper()
	secret := "shm-" + randHex(8)
	for key := 0x5d500000 + int(marks.Add(1)); ; key++ {
		id, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		must(t, err)
		t.Cleanup(func() { _, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
		mem, err := unix.SysvShmAttach(id, 0, 0)
		must(t, err)
		copy(mem, secret)
		must(t, unix.SysvShmDetach(mem))
		return key, secret
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func killMatching(marker string) {
	for _, p := range testplugins.Matching(marker) {
		if pid, err := strconv.Atoi(strings.SplitN(p, ":", 2)[0]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// policy is the fixture's: its workspace writable, its protected paths.
func (f *fixture) policy() *sandbox.Policy {
	return &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: f.ws, ProtectedPaths: f.protected}
}

func (f *fixture) options() Options {
	return Options{Hide: []string{f.run}, Show: []string{f.shown}, ReadOnly: f.readOnly}
}

func (f *fixture) env() map[string]string {
	nr := func(n uintptr) string { return strconv.Itoa(int(n)) }
	return map[string]string{
		"WS": f.ws, "OUT": f.out, "RUN": f.run, "SHOWN": f.shown, "OTHERSPILL": f.otherSpill, "PLUG": f.plug, "PY": f.w.py, "PYTHONPATH": f.w.dir,
		"TCP4": strconv.Itoa(f.w.tcp4.port), "TCP6": strconv.Itoa(f.w.tcp6.port), "UDP4": strconv.Itoa(f.w.udp4.port),
		"SOCK": f.w.sockPath, "ABSTRACT": f.w.abstractName, "HOSTPID": strconv.Itoa(os.Getpid()),
		"SLEEPER": strconv.Itoa(f.sleeper.Process.Pid), "FD": strconv.Itoa(f.fd), "HOSTPTS": strconv.Itoa(f.ptyN), "DISK": f.w.disk, "SHMKEY": strconv.Itoa(f.shmKey), "SHMSECRET": f.shmSecret, "TOKENFD": strconv.Itoa(f.tokenFD), "MARK": f.mark,
		"CGROOT": f.w.cgroot, "KEYDESC": f.key, "SECRET_MEM": f.secret,
		"NR_CLONE3": nr(unix.SYS_CLONE3), "NR_IO_URING_SETUP": nr(unix.SYS_IO_URING_SETUP), "NR_BPF": nr(unix.SYS_BPF),
		"NR_PERF_EVENT_OPEN": nr(unix.SYS_PERF_EVENT_OPEN), "NR_USERFAULTFD": nr(unix.SYS_USERFAULTFD),
		"NR_ADD_KEY": nr(unix.SYS_ADD_KEY), "NR_UNSHARE": nr(unix.SYS_UNSHARE), "NR_SETNS": nr(unix.SYS_SETNS),
	}
}

// exec runs script in the fixture's workspace, confined by c unless nil,
// through m.
func (f *fixture) exec(t *testing.T, m *procs.Manager, c *Confinement, script string) procs.Result {
	t.Helper()
	spec := procs.Spec{Argv: []string{"bash", "-c", script}, Dir: f.ws, Owner: "probe", Env: f.env(), Timeout: 20 * time.Second, Grace: 200 * time.Millisecond}
	if c != nil {
		spec.Confine = c.Confine
	}
	p, err := m.Spawn(spec)
	if err != nil {
		t.Fatalf("spawn %q: %v", script, err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	m.Forget(p.ID)
	return p.Result()
}

// snapshot is what the command must leave as it was: everything under
// the outside, runtime and plugin directories, and the protected paths
// with the directories on the way to them. A key per path: its type,
// mode, owner, size, mtime, inode, xattrs and content.
func (f *fixture) snapshot() map[string]string {
	s := map[string]string{}
	add := func(path string) {
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			s[path] = "absent"
			return
		}
		v := fmt.Sprintf("mode=%o uid=%d gid=%d size=%d mtime=%d ino=%d", st.Mode, st.Uid, st.Gid, st.Size, st.Mtim.Nano(), st.Ino)
		if path == filepath.Join(f.ws, ".git") {
			// The repository's own directory: commands change its entries
			// (index.lock); it must stay the same directory.
			s[path] = fmt.Sprintf("dir ino=%d", st.Ino)
			return
		}
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			b, _ := os.ReadFile(path)
			v += fmt.Sprintf(" content=%q", b)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			l, _ := os.Readlink(path)
			v += " link=" + l
		}
		buf := make([]byte, 1024)
		if n, err := unix.Llistxattr(path, buf); err == nil && n > 0 {
			v += fmt.Sprintf(" xattrs=%q", buf[:n])
		}
		s[path] = v
	}
	for _, dir := range []string{f.out, f.run, f.plug} {
		_ = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, _ error) error { add(path); return nil })
	}
	for _, p := range slices.Concat([]string{filepath.Join(f.ws, ".git"), filepath.Join(f.ws, "bin")}, f.protected) {
		_ = filepath.WalkDir(p, func(path string, _ fs.DirEntry, err error) error {
			if err != nil {
				add(path) // absent
				return nil
			}
			add(path)
			return nil
		})
		if p == filepath.Join(f.ws, ".git") {
			// Only the repository's protected parts: the rest is the
			// commands' to change (index, objects, refs).
			for k := range s {
				if within(p, k) && k != p && !within(filepath.Join(p, "config"), k) && !within(filepath.Join(p, "hooks"), k) {
					delete(s, k)
				}
			}
		}
	}
	for _, p := range []string{"/tmp/dsh-probe-" + f.mark, filepath.Join(f.ws, "late"), filepath.Join(f.ws, "late2")} {
		add(p)
	}
	return s
}

// changed says what differs between the snapshot now and before.
func (f *fixture) changed() error {
	now := f.snapshot()
	var diffs []string
	for k, v := range f.before {
		if now[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: %s -> %s", k, v, now[k]))
		}
	}
	for k, v := range now {
		if _, ok := f.before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: new (%s)", k, v))
		}
	}
	if len(diffs) > 0 {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

// Checks of what a probe may have reached.

func noMarker(marker string) func(*fixture, procs.Result) error {
	return func(_ *fixture, r procs.Result) error {
		if bytes.Contains(r.Stdout.Data, []byte(marker)) {
			return fmt.Errorf("stdout has %q: %q", marker, r.Stdout.Data)
		}
		return nil
	}
}

func escaped() func(*fixture, procs.Result) error { return noMarker("ESCAPED") }

func noToken(f *fixture, r procs.Result) error { return noMarker(f.token)(f, r) }

func noSecret(f *fixture, r procs.Result) error { return noMarker(f.secret)(f, r) }

func untouched(get func(*world) *counter) func(*fixture, procs.Result) error {
	return func(f *fixture, _ procs.Result) error {
		c := get(f.w)
		if c.waitChange(f.base[c], 300*time.Millisecond) {
			return fmt.Errorf("the host's listener got %d connection(s) or datagram(s)", c.count()-f.base[c])
		}
		return nil
	}
}

func sleeperIntact(f *fixture, _ procs.Result) error {
	select {
	case <-f.sleeperDone:
		return errors.New("the host's sleep died")
	case <-time.After(50 * time.Millisecond):
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", f.sleeper.Process.Pid))
	if err != nil {
		return err
	}
	if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
		return fmt.Errorf("the host's sleep is stopped: %s", b)
	}
	return nil
}

func noSurvivor(f *fixture, _ procs.Result) error {
	time.Sleep(300 * time.Millisecond)
	if s := testplugins.Matching("sleep " + f.mark); len(s) > 0 {
		return fmt.Errorf("outlived its command: %v", s)
	}
	return nil
}

func noHostMount(f *fixture, _ procs.Result) error {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(b, []byte(" "+filepath.Join(f.ws, "m")+" ")) {
		return errors.New("a mount appeared in the host's namespace")
	}
	return nil
}

func noKey(f *fixture, _ procs.Result) error {
	if _, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", f.key, 0); err == nil {
		return fmt.Errorf("key %s is in the host's user keyring", f.key)
	}
	return nil
}

func noUSR2(f *fixture, _ procs.Result) error {
	time.Sleep(100 * time.Millisecond)
	if n := f.w.usr2.Load() - f.usr2; n > 0 {
		return fmt.Errorf("the host got %d SIGUSR2", n)
	}
	return nil
}

// terminalQuiet: nothing was written to the host's terminal.
func terminalQuiet(f *fixture, _ procs.Result) error {
	fds := []unix.PollFd{{Fd: int32(f.pty), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 100)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return nil
		}
		buf := make([]byte, 256)
		k, _ := unix.Read(f.pty, buf)
		// The host's own typing echoes back; anything else came from the command.
		if got := strings.TrimSpace(strings.ReplaceAll(string(buf[:k]), f.typed, "")); got != "" {
			return fmt.Errorf("the host's terminal shows %q", buf[:k])
		}
	}
}

func noTyped(f *fixture, r procs.Result) error { return noMarker(f.typed)(f, r) }

func later(f *fixture, _ procs.Result) error {
	time.Sleep(900 * time.Millisecond) // the children write after 400 ms
	return nil
}

// verdict is the probe's on a run: nil when nothing outside changed.
func (pr escapeProbe) verdict(f *fixture, r procs.Result) error {
	var errs []error
	if pr.held != nil {
		errs = append(errs, pr.held(f, r))
	}
	if err := f.changed(); err != nil {
		errs = append(errs, fmt.Errorf("the world changed: %w", err))
	}
	return errors.Join(errs...)
}

func (pr escapeProbe) denialRE() *regexp.Regexp {
	switch pr.denial {
	case "":
		return regexp.MustCompile(defaultDenial)
	case "-":
		return nil
	}
	return regexp.MustCompile(pr.denial)
}

// escapeProbes are the escape attempts.
var escapeProbes = []escapeProbe{
	// Writes and metadata outside the writable roots.
	{name: "write a new file outside", script: `echo x > "$OUT/new"`},
	{name: "overwrite a file outside", script: `echo x > "$OUT/orig"`},
	{name: "write outside through a symlink", script: `ln -s "$OUT" link && echo x > link/via-link`},
	{name: "write through a hard link into the workspace", script: `ln "$OUT/orig" hl && echo x >> hl`},
	{name: "write through /proc/self/root", script: `echo x > "/proc/self/root$OUT/via-proc"`},
	{name: "write /tmp", script: `echo x > "/tmp/dsh-probe-$MARK"`},
	{name: "mkdir outside", script: `mkdir "$OUT/dir"`},
	{name: "mkfifo outside", script: `mkfifo "$OUT/fifo"`},
	{name: "symlink outside", script: `ln -s /etc/passwd "$OUT/sym"`},
	{name: "remove a file outside", script: `rm "$OUT/orig"`},
	{name: "rename a file outside", script: `mv "$OUT/orig" "$OUT/moved"`},
	{name: "move a file outside into the workspace", script: `mv "$OUT/orig" ./stolen`},
	{name: "truncate a file outside", script: `truncate -s 0 "$OUT/orig"`},
	{name: "chmod outside", script: `chmod 777 "$OUT/orig"`},
	{name: "chown outside", script: `chown 65534:65534 "$OUT/orig"`},
	{name: "utimes outside", script: `touch -d 2001-01-01 "$OUT/orig"`},
	{name: "setxattr outside", script: `"$PY" -c 'import os; os.setxattr(os.environ["OUT"] + "/orig", "user.dsh", b"x")'`},
	{name: "write through a descriptor the host leaked", script: `echo leak >&"$FD"`, denial: `(?i)bad file descriptor`},
	{name: "overwrite a plugin binary", script: `echo evil > "$PLUG/dsh-x"`},
	{name: "replace a plugin binary by a move", script: `cp "$PLUG/dsh-x" y && echo evil >> y && mv -f y "$PLUG/dsh-x"`},

	// Devices and terminals of the host.
	{name: "read the disk", script: `head -c 4096 "$DISK" | wc -c | grep -qx 4096 && echo ESCAPED`, needs: diskReadable, held: escaped(), denial: `(?i)no such file|permission denied`},
	{name: "read the disk through a device node in the workspace", script: `head -c 4096 disk | wc -c | grep -qx 4096 && echo ESCAPED`, needs: diskReadable, held: escaped()},
	{name: "open a device node in the workspace", script: `head -c 16 urandom | wc -c | grep -qx 16 && echo ESCAPED`, held: escaped()},
	{name: "read the console's screen", script: `head -c 1 /dev/vcs >/dev/null && echo ESCAPED`, needs: readable("/dev/vcs"), held: escaped(), denial: `(?i)no such file|permission denied`},
	{name: "write to a terminal of the host", script: `echo evil > /dev/pts/$HOSTPTS`, held: terminalQuiet, denial: `(?i)no such file|permission denied`},
	{name: "read what is typed on a terminal of the host", script: `timeout 1 head -n1 /dev/pts/$HOSTPTS`, held: noTyped, denial: `(?i)no such file|permission denied`},

	{name: "read the host's System V shared memory", script: `"$PY" -c 'import probe; probe.shm()'`, held: func(f *fixture, r procs.Result) error { return noMarker(f.shmSecret)(f, r) }, denial: `(?i)no such file|not permitted|permission denied`},

	// The host's runtime directory, hidden.
	{name: "read the host's token", script: `cat "$RUN/token"`, denial: `(?i)no such file`, held: noToken},
	{name: "see the host's runtime directory", script: `test -e "$RUN/token" && echo ESCAPED`, denial: "-", held: escaped()},
	{name: "write the host's runtime directory", script: `echo x > "$RUN/evil"`},
	{name: "read another session's spill file", script: `cat "$OTHERSPILL"`, denial: `(?i)no such file`, held: noToken},
	{name: "write into its own session's spill directory", script: `echo x > "$SHOWN/evil"`},
	{name: "overwrite its own session's spill file", script: `echo x > "$SHOWN/stdout-1"`},

	// The plugin binaries the host runs, inside a writable root.
	{name: "overwrite a plugin binary in the workspace", script: `echo evil > bin/dsh-y`},
	{name: "replace a plugin binary in the workspace", script: `mv bin b2 && mkdir bin && echo evil > bin/dsh-y`},

	// Protected paths inside the workspace.
	{name: "append to .git/config", script: `echo '[core] hooksPath = /tmp' >> .git/config`},
	{name: "git config", script: `git config user.name evil`, tool: "git", denial: `(?i)resource busy|could not|read-only`},
	{name: "add a git hook", script: `printf '#!/bin/sh\necho evil\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`},
	{name: "replace the hooks directory", script: `rm -rf .git/hooks && mkdir .git/hooks && echo evil > .git/hooks/pre-commit`},
	{name: "rename .git away and recreate it", script: `mv .git x && mkdir -p .git && echo evil > .git/config`},
	{name: "rename .git/config away and recreate it", script: `mv .git/config .git/config.bak && echo evil > .git/config`},
	{name: "write .claude", script: `echo evil > .claude/x`},
	{name: "overwrite .claude/settings.json", script: `echo '{"evil": true}' > .claude/settings.json`},
	{name: "rename .claude away and recreate it", script: `mv .claude c2 && mkdir .claude && echo evil > .claude/settings.json`},
	{name: "overwrite the composition", script: `echo evil > dsh.yaml`},
	{name: "replace the composition by a rename", script: `echo evil > new.yaml && mv -f new.yaml dsh.yaml`},

	// The network, off: every family, to listeners on the host's loopback.
	{name: "tcp v4 to the host", script: `exec 3<>/dev/tcp/127.0.0.1/$TCP4`, held: untouched(func(w *world) *counter { return w.tcp4 })},
	{name: "tcp v6 to the host", script: `"$PY" -c 'import probe; probe.tcp6()'`, held: untouched(func(w *world) *counter { return w.tcp6 })},
	{name: "udp v4 to the host", script: `"$PY" -c 'import probe; probe.udp()'`, held: untouched(func(w *world) *counter { return w.udp4 })},
	{name: "raw socket to the host", script: `"$PY" -c 'import probe; probe.raw()'`, held: untouched(func(w *world) *counter { return w.udp4 })},
	{name: "mptcp to the host", script: `"$PY" -c 'import probe; probe.mptcp()'`, held: untouched(func(w *world) *counter { return w.tcp4 })},
	{name: "unix socket at a path", script: `"$PY" -c 'import probe; probe.unix_path()'`, held: untouched(func(w *world) *counter { return w.unixPath })},
	{name: "abstract unix socket", script: `"$PY" -c 'import probe; probe.abstract()'`, held: untouched(func(w *world) *counter { return w.abstract })},

	// Other processes.
	{name: "ptrace the host's sleep", script: `"$PY" -c 'import probe; probe.ptrace_kill()'`, held: sleeperIntact},
	{name: "strace the host's sleep", script: `strace -qq -p "$SLEEPER" -e trace=all -e inject=all:signal=KILL -o /dev/null & for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; test -e /proc/$SLEEPER || exit 0; done; exit 1`, tool: "strace", held: sleeperIntact, denial: `(?i)operation not permitted|permission denied`},
	{name: "read another process's memory", script: `"$PY" -c 'import probe; probe.vm_read()'`, held: noSecret},
	{name: "read the host's environ", script: `tr '\0' '\n' < /proc/$HOSTPID/environ | grep -q '^PATH=' && echo ESCAPED`, held: escaped()},
	{name: "follow the host's descriptors", script: `ls -l /proc/$HOSTPID/fd | grep -q -- '->' && echo ESCAPED`, held: escaped()},
	{name: "read a file through the host's descriptor", script: `cat /proc/$HOSTPID/fd/$TOKENFD`, held: noToken},
	{name: "read the host's memory map", script: `grep -q . /proc/$HOSTPID/maps && echo ESCAPED`, held: escaped()},
	{name: "read another process's environ", script: `tr '\0' '\n' < /proc/$SLEEPER/environ | grep -q DSH_PROBE_MEM && echo ESCAPED`, held: escaped()},
	{name: "signal the host", script: `kill -USR2 $HOSTPID`, held: noUSR2},
	{name: "kill a process outside", script: `kill -TERM $SLEEPER`, held: sleeperIntact},
	{name: "stop a process outside", script: `kill -STOP $SLEEPER`, held: sleeperIntact},
	{name: "probe a process outside with kill -0", script: `kill -0 $SLEEPER && echo ESCAPED`, held: escaped()},

	// Privilege.
	{name: "capabilities", script: `"$PY" -c 'import probe; probe.caps()'`, denial: "-", held: escaped()},
	{name: "mount", script: `mount -t tmpfs probe m`, held: noHostMount},
	{name: "sethostname", script: `"$PY" -c 'import probe; probe.sethostname()'`, held: escaped()},
	{name: "unshare -U", script: `unshare -U true && echo ESCAPED`, tool: "unshare", held: escaped()},
	{name: "unshare -r", script: `unshare -r true && echo ESCAPED`, tool: "unshare", held: escaped()},
	{name: "unshare(CLONE_NEWUSER)", script: `"$PY" -c 'import probe; probe.unshare_user()'`, held: escaped()},
	{name: "clone3 with CLONE_NEWUSER", script: `"$PY" -c 'import probe; probe.clone3_newuser()'`, held: escaped()},
	{name: "nsenter the host's mount namespace", script: `nsenter -t $SLEEPER -m true && echo ESCAPED`, tool: "nsenter", held: escaped()},
	{name: "setns into the host's mount namespace", script: `"$PY" -c 'import probe; probe.setns_host()'`, held: escaped()},
	{name: "chroot", script: `chroot / true && echo ESCAPED`, held: escaped()},
	{name: "io_uring", script: `"$PY" -c 'import probe; probe.io_uring()'`, held: escaped()},
	{name: "bpf", script: `"$PY" -c 'import probe; probe.bpf()'`, held: escaped()},
	{name: "perf_event_open", script: `"$PY" -c 'import probe; probe.perf()'`, held: escaped()},
	{name: "userfaultfd", script: `"$PY" -c 'import probe; probe.userfaultfd()'`, held: escaped()},
	{name: "add a key to the user keyring", script: `"$PY" -c 'import probe; probe.add_key()'`, held: noKey},

	// Escapes that outlive the command.
	{name: "move into the root cgroup", script: `(echo $BASHPID > "$CGROOT/cgroup.procs" && exec sleep $MARK) & sleep 0.3; kill -0 $!`, held: noSurvivor},
	{name: "clone3 into the root cgroup", script: `"$PY" -c 'import probe; probe.clone3_cgroup()'`, held: noSurvivor, denial: `(?i)no such file|bad file descriptor|invalid argument|not permitted|permission denied`},
	{name: "a setsid child writes later", script: `setsid sh -c 'sleep 0.4; echo late > "$WS/late"; echo late > "$OUT/late"' </dev/null >/dev/null 2>&1 & echo now > "$OUT/now"`, held: later, treeEscape: true},
	{name: "a nohup grandchild writes later", script: `(nohup sh -c 'sleep 0.4; echo late > "$WS/late2"; echo late > "$OUT/late2"' </dev/null >/dev/null 2>&1 &); echo now > "$OUT/now"`, held: later, treeEscape: true},
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
