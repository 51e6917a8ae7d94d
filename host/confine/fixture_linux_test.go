package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/dshrun/dsh/internal/testplugins"
)

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
