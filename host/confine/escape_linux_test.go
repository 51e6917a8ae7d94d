package confine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testneeds"
)

func TestMain(m *testing.M) {
	// The test binary stands for the host, which is non-dumpable.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_DUMPABLE:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// asRoot skips what needs root: the probes must get through unconfined.
func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the escape probes run as root (they must get through unconfined)")
	}
}

func prepareFor(t *testing.T, f *fixture, skip layers) *Confinement {
	t.Helper()
	c, err := prepare(f.policy(), sandbox.WorkspaceWrite, f.options(), skip)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func output(r procs.Result) string {
	return fmt.Sprintf("exit %d\nstdout %q\nstderr %q", r.ExitCode, r.Stdout.Data, r.Stderr.Data)
}

// Every probe gets through unconfined and is held confined: it fails,
// says it was denied, and the world around the command is unchanged.
func TestEscapes(t *testing.T) {
	asRoot(t)
	w := newWorld(t)
	ran := 0
	for _, pr := range escapeProbes {
		t.Run(pr.name, func(t *testing.T) {
			if pr.tool != "" {
				testneeds.Command(t, pr.tool)
			}
			if pr.needs != nil {
				if why := pr.needs(w); why != "" {
					t.Skip(why)
				}
			}
			f := w.fixture(t)
			m := w.m
			if pr.treeEscape {
				m = w.noCgroups
			}
			r := f.exec(t, m, nil, pr.script)
			if r.ExitCode != 0 {
				t.Fatalf("does not get through unconfined, so it proves nothing:\n%s", output(r))
			}
			if err := pr.verdict(f, r); err == nil {
				t.Fatalf("changes nothing unconfined, so it proves nothing:\n%s", output(r))
			}

			ran++
			f = w.fixture(t)
			c := prepareFor(t, f, 0)
			r = f.exec(t, w.m, c, pr.script)
			if r.ExitCode == 0 {
				t.Errorf("got through confined:\n%s", output(r))
			}
			if re := pr.denialRE(); re != nil && !re.Match(append(r.Stdout.Data, r.Stderr.Data...)) {
				t.Errorf("failed confined without a denial matching %s:\n%s", re, output(r))
			}
			if err := pr.verdict(f, r); err != nil {
				t.Errorf("confined, it reached the world: %v\n%s", err, output(r))
			}
		})
	}
	if ran < 40 {
		t.Errorf("only %d probes ran here; the suite wants at least 40", ran)
	}
}

func probeNamed(t *testing.T, name string) escapeProbe {
	for _, pr := range escapeProbes {
		if pr.name == name {
			return pr
		}
	}
	t.Fatalf("no probe %q", name)
	return escapeProbe{}
}

// Each layer holds something alone: without it, these probes get through
// the other layers. So every probe is held for the reason it names, and a
// layer that silently stopped working would show.
func TestEachLayerHolds(t *testing.T) {
	asRoot(t)
	w := newWorld(t)
	for _, tc := range []struct {
		layer  layers
		name   string
		probes []string
	}{
		{layerMountNS, "the mount namespace", []string{"append to .git/config", "rename .git away and recreate it", "overwrite the composition", "read the host's token",
			"read what is typed on a terminal of the host", "open a device node in the workspace"}},
		{layerChroot, "the root off the namespace's", []string{"clone3 with CLONE_NEWUSER"}},
		{layerHideCgroups, "hidden cgroups", []string{"clone3 into the root cgroup"}},
		{layerNetNS, "the network namespace", []string{"tcp v4 to the host", "udp v4 to the host", "mptcp to the host"}},
		{layerIPCNS, "the IPC namespace", []string{"read the host's System V shared memory"}},
		{layerLandlock, "Landlock", []string{"kill a process outside", "signal the host"}},
		{layerCaps, "dropped capabilities", []string{"capabilities"}},
		{layerSeccomp, "seccomp", []string{"unix socket at a path", "add a key to the user keyring", "perf_event_open", "io_uring"}},
		{layerFDs, "close-on-exec descriptors", []string{"write through a descriptor the host leaked"}},
	} {
		for _, name := range tc.probes {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				pr := probeNamed(t, name)
				f := w.fixture(t)
				c := prepareFor(t, f, tc.layer)
				r := f.exec(t, w.m, c, pr.script)
				if r.ExitCode != 0 || pr.verdict(f, r) == nil {
					t.Errorf("held without %s too, so it does not show that layer:\n%s", tc.name, output(r))
				}
			})
		}
	}
}

// What confined commands must still do.
func TestStillWorks(t *testing.T) {
	asRoot(t)
	w := newWorld(t)
	f := w.fixture(t)
	c := prepareFor(t, f, 0)
	// A descriptor the host leaked just now (no close-on-exec), before the
	// first command.
	leak, err := unix.Open(filepath.Join(f.out, "orig"), unix.O_RDONLY, 0)
	must(t, err)
	defer unix.Close(leak)
	for _, tc := range []struct {
		name, script, want, tool string
	}{
		// Not through a pipe: bash holds its ends while ls looks.
		{"only stdio descriptors", `ls /proc/$$/fd > fds && tr '\n' ' ' < fds`, "0 1 2", ""},
		{"move files and directories", `mkdir -p a/b && echo hi > a/b/f && mv a/b c && mv c/f d && mkdir e && mv d e/ && mv e .claude-not && cat .claude-not/d`, "hi", ""},
		{"commit, with .git/config protected", `echo hi > f && git add f && git -c user.name=a -c user.email=a@b commit -qm m && git log --oneline | wc -l`, "1", "git"},
		{"git init, add, commit in a new repository", `git init -q sub && cd sub && echo x > y && git add y && git -c user.name=a -c user.email=a@b commit -qm m && git rev-list --count HEAD`, "1", "git"},
		{"pipes", `printf 'b\na\n' | sort | head -1`, "a", ""},
		{"/dev/null", `echo x > /dev/null && cat /dev/null && echo ok`, "ok", ""},
		{"a pty (python)", `"$PY" -c 'import pty, os; m, s = pty.openpty(); os.write(s, b"hi\n"); print(os.read(m, 16).decode().strip(), "pty ok")'`, "hi pty ok", ""},
		{"a pty (script)", `script -qc 'echo inside' /dev/null | tr -d '\r'`, "inside", "script"},
		{"python3 and sort", `"$PY" -c 'print("b"); print("a")' | sort | tr '\n' ' '`, "a b", ""},
		{"threads", `"$PY" -c 'import threading; t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()'`, "thread", ""},
		{"read outside", `cat "$OUT/orig"`, "orig", ""},
		{"its own loopback, v4 and v6", `"$PY" -c '
import socket
for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam); s.bind((host, 0)); s.listen()
    c = socket.create_connection(s.getsockname()[:2]); a, _ = s.accept(); c.send(b"ok"); print(a.recv(2).decode(), end=" ")
'`, "ok ok", ""},
		{"socketpair", `"$PY" -c 'import socket; a, b = socket.socketpair(); a.send(b"pair"); print(b.recv(4).decode())'`, "pair", ""},
		{"netlink routing", `ip -o link show lo | grep -c LOOPBACK`, "1", "ip"},
		{"a background job", `(sleep 0.1; echo bg > bg) & wait; cat bg`, "bg", ""},
		{"confined as it says", `grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t ' ' ' | tr '\n' ' '`, "NoNewPrivs: 1 Seccomp: 2", ""},
		{"its working directory", `pwd`, f.ws, ""},
		{"the runtime directory shows only its own spill files", `find "$RUN" | sed "s|^$RUN||" | sort | tr '\n' ' '`, "/spill /spill/probe /spill/probe/stdout-1", ""},
		{"read its own spill file", `cat "$SHOWN/stdout-1"`, "spilled", ""},
		{"run a plugin binary kept read-only", `bin/dsh-y`, "plugin", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tool != "" {
				testneeds.Command(t, tc.tool)
			}
			r := f.exec(t, w.m, c, tc.script)
			if r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout.Data)) != tc.want {
				t.Errorf("want %q:\n%s", tc.want, output(r))
			}
		})
	}
	if err := f.changed(); err != nil {
		t.Errorf("the world changed: %v", err)
	}
}

// A confined command that times out and one that fails at birth leave
// nothing behind: the next confined command runs, and unconfined ones,
// run at the same time as confined ones, are not restricted at all; no
// thread of the host stays restricted.
func TestSession(t *testing.T) {
	asRoot(t)
	w := newWorld(t)
	f := w.fixture(t)
	c := prepareFor(t, f, 0)

	p, err := w.m.Spawn(procs.Spec{Argv: []string{"bash", "-c", "sleep " + f.mark + " & sleep " + f.mark}, Dir: f.ws, Owner: "session", Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond, Confine: c.Confine})
	if err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	if r := p.Result(); !r.TimedOut {
		t.Fatalf("the confined timeout: %+v", r)
	}
	if err := noSurvivor(f, procs.Result{}); err != nil {
		t.Fatal(err)
	}
	// Its working directory is hidden inside: the host sees it, the
	// command cannot start there.
	hidden := filepath.Join(f.run, "sub")
	must(t, os.Mkdir(hidden, 0o755))
	if p, err := w.m.Spawn(procs.Spec{Argv: []string{"true"}, Dir: hidden, Owner: "session", Confine: c.Confine}); err == nil {
		bounded.Receive(t, p.Done(), "the process's end")
		t.Fatalf("a confined command started in a hidden directory: %+v", p.Result())
	} else if !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("a confined command in a hidden directory: %v, want it not found", err)
	}
	if r := f.exec(t, w.m, c, "echo again > again && cat again"); r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout.Data)) != "again" {
		t.Fatalf("a confined command after a timeout and a failed start:\n%s", output(r))
	}

	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			r := f.exec(t, w.m, c, `grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t ' ' ' | tr '\n' ' '; echo x > "$OUT/confined"`)
			if r.ExitCode == 0 || !bytes.Contains(r.Stdout.Data, []byte("NoNewPrivs: 1 Seccomp: 2")) {
				errs <- fmt.Errorf("a confined command, concurrent:\n%s", output(r))
			}
		}()
		go func() {
			defer wg.Done()
			r := f.exec(t, w.m, nil, fmt.Sprintf(`grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status | tr -s '\t ' ' ' | tr '\n' ' '; echo x > "$OUT/free-%d"`, i))
			if r.ExitCode != 0 || !bytes.Contains(r.Stdout.Data, []byte("NoNewPrivs: 0 Seccomp: 0")) || bytes.Contains(r.Stdout.Data, []byte("CapEff: 0000000000000000")) {
				errs <- fmt.Errorf("an unconfined command, concurrent with confined ones, is restricted:\n%s", output(r))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(f.out, "confined")); err == nil {
		t.Error("a confined command wrote outside")
	}
	// The restricted threads end with their commands (while one runs, its
	// thread shows).
	p, err = w.m.Spawn(procs.Spec{Argv: []string{"sleep", "0.3"}, Dir: f.ws, Owner: "session", Confine: c.Confine})
	if err != nil {
		t.Fatal(err)
	}
	if len(restrictedThreads()) == 0 {
		t.Error("no restricted thread while a confined command runs: the check sees nothing")
	}
	bounded.Receive(t, p.Done(), "the process's end")
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		restricted := restrictedThreads()
		if len(restricted) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads of the host stay restricted: %v", restricted)
		}
	}
	if err := os.WriteFile(filepath.Join(f.out, "host"), nil, 0o644); err != nil {
		t.Fatalf("the host after confined commands: %v", err)
	}
}

// restrictedThreads are the host's threads with no_new_privs or seccomp.
func restrictedThreads() []string {
	ents, _ := os.ReadDir("/proc/self/task")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "status"))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte("NoNewPrivs:\t1")) || !bytes.Contains(b, []byte("Seccomp:\t0")) {
			out = append(out, e.Name())
		}
	}
	return out
}

// A protected path that appears, or is replaced from outside (which
// detaches its mount in the namespace), makes the confinement stale; one
// prepared again protects it.
func TestStale(t *testing.T) {
	asRoot(t)
	w := newWorld(t)
	f := w.fixture(t)
	c := prepareFor(t, f, 0)
	if c.Stale() {
		t.Fatal("stale when just prepared")
	}
	if r := f.exec(t, w.m, c, `mkdir .codex && echo x > .codex/config.toml`); r.ExitCode != 0 {
		t.Fatalf("a protected path that did not exist is not protected yet:\n%s", output(r))
	}
	if !c.Stale() {
		t.Fatal("not stale after .codex appeared")
	}
	c = prepareFor(t, f, 0)
	if c.Stale() {
		t.Fatal("stale when prepared again")
	}
	if r := f.exec(t, w.m, c, `echo x > .codex/config.toml`); r.ExitCode == 0 {
		t.Fatalf(".codex is not protected once prepared again:\n%s", output(r))
	}
	// git config from outside: a new file renamed over the old one.
	config := filepath.Join(f.ws, ".git", "config")
	must(t, os.WriteFile(config+".new", []byte("[core]\n"), 0o644))
	must(t, os.Rename(config+".new", config))
	if !c.Stale() {
		t.Fatal("not stale after .git/config was replaced")
	}
	if r := f.exec(t, w.m, c, `echo x >> .git/config`); r.ExitCode != 0 {
		t.Logf("the replaced .git/config is still held in the stale namespace (%s)", r.Stderr.Data)
	} else {
		t.Logf("the replaced .git/config is writable in the stale namespace, as expected: its mount went with the old file")
	}
	c = prepareFor(t, f, 0)
	if r := f.exec(t, w.m, c, `echo x >> .git/config`); r.ExitCode == 0 {
		t.Fatalf(".git/config is writable after preparing again:\n%s", output(r))
	}
	// A hidden directory that appears.
	later := filepath.Join(t.TempDir(), "later")
	c, err := Prepare(f.policy(), sandbox.WorkspaceWrite, Options{Hide: []string{later}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	must(t, os.Mkdir(later, 0o755))
	if !c.Stale() {
		t.Fatal("not stale after a hidden directory appeared")
	}
}

// What Prepare refuses, rather than confine less than asked.
func TestPrepareRefuses(t *testing.T) {
	asRoot(t)
	ws := t.TempDir()
	must(t, os.Symlink("/etc", filepath.Join(ws, ".claude")))
	for _, tc := range []struct {
		name string
		p    *sandbox.Policy
		mode string
		opt  Options
		want string
	}{
		{"a relative unix socket", &sandbox.Policy{WorkspaceRoot: ws, UnixSockets: []string{"run/agent.sock"}}, sandbox.WorkspaceWrite, Options{}, "unix socket \"run/agent.sock\" is not absolute"},
		{"a protected symlink", &sandbox.Policy{WorkspaceRoot: ws, ProtectedPaths: []string{filepath.Join(ws, ".claude")}}, sandbox.WorkspaceWrite, Options{}, "symlink"},
		{"a relative protected path", &sandbox.Policy{WorkspaceRoot: ws, ProtectedPaths: []string{".git/config"}}, sandbox.WorkspaceWrite, Options{}, "absolute"},
		{"a relative root", &sandbox.Policy{WorkspaceRoot: "ws"}, sandbox.WorkspaceWrite, Options{}, "absolute"},
		{"a hidden file", &sandbox.Policy{WorkspaceRoot: ws}, sandbox.WorkspaceWrite, Options{Hide: []string{"/etc/passwd"}}, "not a directory"},
		{"no workspace", &sandbox.Policy{}, sandbox.WorkspaceWrite, Options{}, "workspace root"},
		{"danger-full-access", &sandbox.Policy{WorkspaceRoot: ws}, sandbox.DangerFullAccess, Options{}, "confines nothing"},
		{"an unknown mode", &sandbox.Policy{WorkspaceRoot: ws}, "yolo", Options{}, "unknown"},
	} {
		c, err := Prepare(tc.p, tc.mode, tc.opt)
		if err == nil {
			c.Close()
			t.Errorf("%s: prepared", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

// Read-only mode: nothing is writable, everything readable.
func TestReadOnly(t *testing.T) {
	asRoot(t)
	w := newWorld(t)
	f := w.fixture(t)
	c, err := Prepare(f.policy(), sandbox.ReadOnly, f.options())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := f.exec(t, w.m, c, `cat dsh.yaml "$OUT/orig" >/dev/null && echo x > f`); r.ExitCode == 0 || !bytes.Contains(r.Stderr.Data, []byte("Read-only file system")) {
		t.Fatalf("read-only mode:\n%s", output(r))
	}
	if _, err := os.Stat(filepath.Join(f.ws, "f")); err == nil {
		t.Fatal("read-only mode wrote in the workspace")
	}
}

// runBPF runs a classic BPF program on a seccomp_data, as the kernel
// would (the subset the filter uses).
func runBPF(t *testing.T, prog []unix.SockFilter, nr, arch uint32, args ...uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= in.K
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var taken bool
			switch in.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				taken = acc == in.K
			case unix.BPF_JGE:
				taken = acc >= in.K
			case unix.BPF_JSET:
				taken = acc&in.K != 0
			}
			if taken {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		default:
			t.Fatalf("instruction %d: unknown code %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

// The seccomp program decides as its comment says, for each syscall it
// names and for the architecture checks no probe here can reach.
func TestSeccompProgram(t *testing.T) {
	prog, err := seccompFilter(false)
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	for _, tc := range []struct {
		name string
		nr   uint32
		args []uint64
		want uint32
	}{
		{"getpid", unix.SYS_GETPID, nil, allow},
		{"clone3", unix.SYS_CLONE3, nil, allow},
		{"socket unix", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, eperm},
		{"socket inet stream", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, allow},
		{"socket inet6 mptcp", unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_STREAM, 262}, allow},
		{"socket inet raw", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_RAW | unix.SOCK_NONBLOCK}, eperm},
		{"socket inet6 packet", unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_PACKET}, eperm},
		{"socket netlink route", unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, allow},
		{"socket netlink audit", unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT}, eperm},
		{"socket packet", unix.SYS_SOCKET, []uint64{unix.AF_PACKET, unix.SOCK_RAW}, eperm},
		{"socket vsock", unix.SYS_SOCKET, []uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, eperm},
		{"socketpair unix", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow},
		{"socketpair inet", unix.SYS_SOCKETPAIR, []uint64{unix.AF_INET, unix.SOCK_STREAM}, eperm},
		{"clone a process", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, allow},
		{"clone a thread", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD}, allow},
		{"clone a user namespace", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, eperm},
		{"clone a network namespace", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNET}, eperm},
		{"unshare the file system context", unix.SYS_UNSHARE, []uint64{unix.CLONE_FS | unix.CLONE_FILES}, allow},
		{"unshare a user namespace", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"unshare a time namespace", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWTIME}, eperm},
		{"the high word of clone's flags", unix.SYS_CLONE, []uint64{1 << 40}, allow},
	} {
		if got := runBPF(t, prog, tc.nr, auditArch, tc.args...); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
	for _, nr := range deniedSyscalls {
		if got := runBPF(t, prog, nr, auditArch); got != eperm {
			t.Errorf("syscall %d: %#x, want EPERM", nr, got)
		}
	}
	if got := runBPF(t, prog, unix.SYS_GETPID, 0x40000003 /* AUDIT_ARCH_I386 */); got != unix.SECCOMP_RET_KILL_PROCESS {
		t.Errorf("a foreign architecture: %#x, want the process killed", got)
	}
	if runtime.GOARCH == "amd64" {
		if got := runBPF(t, prog, x32SyscallBit|unix.SYS_SOCKET, auditArch, unix.AF_UNIX); got != unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS) {
			t.Errorf("an x32 syscall: %#x, want ENOSYS", got)
		}
	}
	// A policy naming unix sockets: socket(AF_UNIX) goes through, the
	// other families are decided as before.
	prog, err = seccompFilter(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []uint64
		want uint32
	}{
		{"socket unix", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, allow},
		{"socket inet stream", []uint64{unix.AF_INET, unix.SOCK_STREAM}, allow},
		{"socket inet raw", []uint64{unix.AF_INET, unix.SOCK_RAW}, eperm},
		{"socket packet", []uint64{unix.AF_PACKET, unix.SOCK_RAW}, eperm},
		{"socket netlink audit", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT}, eperm},
	} {
		if got := runBPF(t, prog, unix.SYS_SOCKET, auditArch, tc.args...); got != tc.want {
			t.Errorf("with named sockets, %s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}
