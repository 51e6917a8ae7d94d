package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
)

// coverYoungSockets makes Wrap cover sockets however new, for tests whose
// own listeners were just made.
func coverYoungSockets(t *testing.T) {
	prev := socketSettle
	socketSettle = 0
	t.Cleanup(func() { socketSettle = prev })
}

// findBwrap is the runner, or a skip when bubblewrap is not installed. One
// that is installed but cannot confine here fails the test: that runner
// would be broken, not absent.
func findBwrap(t testing.TB) *Bubblewrap {
	t.Helper()
	testneeds.Command(t, "bwrap")
	b, err := FindBubblewrap()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newManager(t testing.TB) *procs.Manager {
	t.Helper()
	m, err := procs.New(procs.Config{SpillDir: filepath.Join(t.TempDir(), "spill")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(t.Context()) })
	return m
}

// bwrapRun runs script under bash in dir through m, wrapped by b under
// mode of p when b is not nil.
func bwrapRun(t *testing.T, m *procs.Manager, b *Bubblewrap, p *sandbox.Policy, mode string, opt Options, dir, script string) procs.Result {
	t.Helper()
	pr := spawnWrapped(t, m, b, p, mode, opt, procs.Spec{Argv: []string{"bash", "-c", script}, Dir: dir, Owner: "test", Timeout: 20 * time.Second})
	bounded.Receive(t, pr.Done(), "the process's end")
	return pr.Result()
}

// spawnWrapped spawns spec, its argv wrapped by b (when not nil) just
// before, as the service would. A start that failed because a socket
// another process removed in between is retried with a fresh wrap (other
// tests on this machine come and go with theirs); this waits for such a
// failure until bwrap has run the command (its mounts made), however slow
// the machine, so a longer-running command is returned running.
func spawnWrapped(t testing.TB, m *procs.Manager, b *Bubblewrap, p *sandbox.Policy, mode string, opt Options, spec procs.Spec) *procs.Process {
	t.Helper()
	argv := spec.Argv
	for attempt := 1; ; attempt++ {
		if b != nil {
			var err error
			if spec.Argv, err = b.Wrap(p, mode, opt, argv); err != nil {
				t.Fatalf("wrap %q: %v", argv, err)
			}
		}
		pr, err := m.Spawn(spec)
		if err != nil {
			t.Fatalf("spawn %q: %v", argv, err)
		}
		if b == nil || attempt == 5 {
			return pr
		}
		if !endsBeforeItsCommand(t, pr) {
			return pr
		}
		r := pr.Result()
		if !b.Vanished(spec.Argv, r.ExitCode, r.Stderr.Data) {
			return pr
		}
		t.Logf("%q: a mounted path went away before the start, wrapping again: %s", argv, lastLine(r.Stderr.Data))
	}
}

// endsBeforeItsCommand waits until the bwrap run pr has ended (true) or
// has run its command (false): some process of its tree runs something
// else than bwrap, which execs the command once every mount is made.
func endsBeforeItsCommand(t testing.TB, pr *procs.Process) bool {
	t.Helper()
	for deadline := time.Now().Add(bounded.Bound); ; {
		select {
		case <-pr.Done():
			return true
		case <-time.After(5 * time.Millisecond):
		}
		if runsOtherThan(pr.Pid, "bwrap") {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("bwrap (pid %d) neither ended nor ran its command within %v", pr.Pid, bounded.Bound)
		}
	}
}

// runsOtherThan reports whether a process below pid has another command
// name than comm.
func runsOtherThan(pid int, comm string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return false
	}
	for _, f := range strings.Fields(string(b)) {
		var child int
		if _, err := fmt.Sscan(f, &child); err != nil {
			continue
		}
		if c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child)); err == nil && strings.TrimSpace(string(c)) != comm {
			return true
		}
		if runsOtherThan(child, comm) {
			return true
		}
	}
	return false
}

// listener counts the connections (or datagrams) a host-side server got,
// answering each with "hi".
type listener struct {
	name string
	got  atomic.Int32
}

func (l *listener) serve(t *testing.T, lis net.Listener) {
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			l.got.Add(1)
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
}

func (l *listener) serveUDP(t *testing.T, pc net.PacketConn) {
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			l.got.Add(1)
			_, _ = pc.WriteTo([]byte("hi"), from)
		}
	}()
}

// snapshot is the state of the files a probe may try to change: names,
// modes, sizes, times and contents (directories' own times left out,
// since undoing a probe changes them).
func snapshot(t *testing.T, paths ...string) string {
	t.Helper()
	var sb strings.Builder
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(&sb, "%s missing\n", path)
				return nil
			}
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if d.IsDir() {
				fmt.Fprintf(&sb, "%s %v\n", path, fi.Mode())
				if path != root && strings.HasSuffix(path, "/objects") {
					return fs.SkipDir // git's objects change with every commit inside
				}
				return nil
			}
			fmt.Fprintf(&sb, "%s %v %d %d", path, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
			if fi.Mode().IsRegular() {
				b, _ := os.ReadFile(path)
				fmt.Fprintf(&sb, " %q", b)
			}
			sb.WriteByte('\n')
			return nil
		})
		if err != nil {
			t.Fatalf("snapshot %s: %v", root, err)
		}
	}
	return sb.String()
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
}

// The bubblewrap runner, on commands started through ctx.subprocess: every
// probe first escapes when nothing confines it (a probe that fails for
// another reason proves nothing), then fails confined with the outside
// world unchanged; what a command needs keeps working; a timed-out and a
// killed command leave nothing behind and the next one runs.
func TestBubblewrap(t *testing.T) {
	b := findBwrap(t)
	testneeds.Command(t, "python3")
	coverYoungSockets(t)
	m := newManager(t)
	ws, outside, rt := t.TempDir(), t.TempDir(), t.TempDir()
	gitIn(t, ws, "init", "-q", ".")
	if err := os.WriteFile(filepath.Join(ws, "README"), []byte("r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws, "add", "README")
	gitIn(t, ws, "commit", "-qm", "first")
	config, err := os.ReadFile(ws + "/.git/config")
	if err != nil {
		t.Fatal(err)
	}
	configTime := time.Date(2021, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.WriteFile(filepath.Join(rt, "token"), []byte("secret-token-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The owner's spill files, shown inside the hidden directory, and a
	// plugin binary of the host's inside the workspace, kept read-only.
	spill, plugin := filepath.Join(rt, "spill", "test"), filepath.Join(ws, "bin", "dsh-plugin")
	for _, f := range []struct{ path, text string }{{filepath.Join(spill, "out.txt"), "spilled\n"}, {plugin, "#!/bin/sh\n"}} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	orig := filepath.Join(outside, "orig")
	stamp := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	resetOrig := func() {
		if err := os.WriteFile(orig, []byte("orig\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(orig, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(orig, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	resetOrig()

	// Host-side servers: TCP on both loopbacks, UDP, a unix socket at a
	// path and an abstract one; two more unix sockets the policy allows,
	// one of them inside the hidden runtime directory.
	tcp4, tcp6, udp4, unixPath, unixAbstract, allowedOut, allowedHidden := &listener{name: "tcp4"}, &listener{name: "tcp6"}, &listener{name: "udp4"}, &listener{name: "unix"}, &listener{name: "abstract"}, &listener{name: "allowed"}, &listener{name: "allowed-hidden"}
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp4.serve(t, lis)
	port4 := lis.Addr().(*net.TCPAddr).Port
	port6 := 0
	if lis, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		tcp6.serve(t, lis)
		port6 = lis.Addr().(*net.TCPAddr).Port
	} else {
		t.Logf("no IPv6 loopback here, the TCPv6 probe is left out: %v", err)
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udp4.serveUDP(t, pc)
	portUDP := pc.LocalAddr().(*net.UDPAddr).Port
	hostSock := filepath.Join(outside, "host.sock")
	abstract := fmt.Sprintf("@dsh-bwrap-test-%d", os.Getpid())
	allowedSock, hiddenSock := filepath.Join(outside, "allowed.sock"), filepath.Join(rt, "allowed.sock")
	for l, addr := range map[*listener]string{unixPath: hostSock, unixAbstract: abstract, allowedOut: allowedSock, allowedHidden: hiddenSock} {
		lis, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		l.serve(t, lis)
	}
	pyConnect := func(family, addr string) string {
		return fmt.Sprintf(`python3 -c 'import socket,sys; s=socket.socket(socket.%s); s.settimeout(2); s.connect(%s); sys.exit(0 if s.recv(2)==b"hi" else 1)'`, family, addr)
	}

	p := &sandbox.Policy{
		DefaultMode:    sandbox.WorkspaceWrite,
		WorkspaceRoot:  ws,
		ProtectedPaths: []string{ws + "/.git/config", ws + "/.git/hooks", ws + "/.claude", ws + "/.codex"},
		UnixSockets:    []string{allowedSock, hiddenSock},
	}
	opt := Options{Hide: []string{rt}, Show: []string{spill}, ReadOnly: []string{plugin}}
	confined := func(script string) procs.Result {
		return bwrapRun(t, m, b, p, sandbox.WorkspaceWrite, opt, ws, script)
	}
	plain := func(script string) procs.Result {
		return bwrapRun(t, m, nil, nil, "", Options{}, ws, script)
	}

	// A host-side process for the kill probe, restarted after the
	// unconfined run kills it.
	var victim *exec.Cmd
	var victimDone chan struct{}
	startVictim := func() {
		victim = exec.Command("sleep", "1000")
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		victimDone = make(chan struct{})
		go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(victim, victimDone)
	}
	startVictim()
	t.Cleanup(func() { _ = victim.Process.Kill() })

	// A host-side SysV shared memory segment, made again after the
	// unconfined run removes it.
	var shm int
	newShm := func() {
		var err error
		if shm, err = unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600); err != nil {
			t.Fatalf("a SysV shared memory segment: %v", err)
		}
	}
	newShm()
	t.Cleanup(func() { _, _ = unix.SysvShmCtl(shm, unix.IPC_RMID, nil) })

	tmpFile := fmt.Sprintf("/tmp/dsh-bwrap-%d", os.Getpid())
	mnt := filepath.Join(ws, "mnt")
	files := func() string {
		return snapshot(t, outside, rt, ws+"/.git/config", ws+"/.git/hooks", ws+"/.git/HEAD", ws+"/.git-away", ws+"/bin", ws+"/bin-away", tmpFile)
	}
	undoFiles := func() {
		_ = os.Remove(tmpFile)
		for _, name := range []string{"escaped", "via-link", "planted"} {
			_ = os.Remove(filepath.Join(outside, name))
		}
		_ = os.Remove(filepath.Join(rt, "planted"))
		_ = os.Remove(filepath.Join(spill, "planted"))
		if _, err := os.Stat(ws + "/bin-away"); err == nil {
			if err := os.RemoveAll(ws + "/bin"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(ws+"/bin-away", ws+"/bin"); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(plugin, stamp, stamp); err != nil {
			t.Fatal(err)
		}
		resetOrig()
		if _, err := os.Stat(ws + "/.git-away"); err == nil {
			if err := os.RemoveAll(ws + "/.git"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(ws+"/.git-away", ws+"/.git"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(ws + "/.git/hooks-away"); err == nil {
			if err := os.RemoveAll(ws + "/.git/hooks"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(ws+"/.git/hooks-away", ws+"/.git/hooks"); err != nil {
				t.Fatal(err)
			}
		}
		_ = os.Remove(ws + "/.git/hooks/x")
		if err := os.WriteFile(ws+"/.git/config", config, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(ws+"/.git/config", configTime, configTime); err != nil {
			t.Fatal(err)
		}
	}
	undoFiles()
	baseline := files()

	type probe struct {
		name   string
		script func() string
		// escaped reports what the probe changed or got outside (""
		// for nothing); nil: the exit status alone tells.
		escaped func() string
		undo    func()
		leak    string // shows in the output unconfined, must not confined
		root    bool   // needs root to escape unconfined
	}
	fileChange := func() string {
		if now := files(); now != baseline {
			return "files changed:\n" + now
		}
		return ""
	}
	count := func(l *listener) (func() string, func()) {
		var before int32
		return func() string {
				if n := l.got.Load(); n != before {
					return fmt.Sprintf("%s listener got %d", l.name, n-before)
				}
				return ""
			}, func() {
				before = l.got.Load()
			}
	}
	static := func(s string) func() string { return func() string { return s } }
	var probes []probe
	file := func(name, script string) {
		probes = append(probes, probe{name: name, script: static(script), escaped: fileChange, undo: undoFiles})
	}
	file("write outside the roots", "echo x > "+outside+"/escaped")
	file("write outside through a symlink", "ln -s "+outside+" link && echo x > link/via-link")
	file("write /tmp", "echo x > "+tmpFile)
	file("chmod outside", "chmod 600 "+orig)
	file("touch outside", "touch "+orig)
	file("write through a hard link into the workspace", "ln "+orig+" hl && echo x >> hl")
	file("write the protected .git/config", "git config probe.planted x")
	file("write into the protected .git/hooks", "echo x > .git/hooks/x")
	file("rename .git away and plant a hook", "mv .git .git-away && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit")
	file("rename .git/hooks away and plant a hook", "mv .git/hooks .git/hooks-away && mkdir .git/hooks && echo evil > .git/hooks/pre-commit")
	file("write into the hidden runtime directory", "echo x > "+rt+"/planted")
	file("write into the shown spill directory", "echo x > "+spill+"/planted")
	file("overwrite the host's plugin binary in the workspace", "echo evil > bin/dsh-plugin")
	file("rename the plugin's directory away and plant one", "mv bin bin-away && mkdir bin && echo evil > bin/dsh-plugin")
	probes = append(probes, probe{name: "read the hidden runtime directory's token", script: static("cat " + rt + "/token"), leak: "secret-token-value"})
	addNet := func(name string, l *listener, script string) {
		esc, reset := count(l)
		probes = append(probes, probe{name: name, script: static(script), escaped: esc, undo: reset})
	}
	addNet("tcp to the host's IPv4 loopback", tcp4, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -c2 <&3 | grep -q hi", port4))
	if port6 != 0 {
		addNet("tcp to the host's IPv6 loopback", tcp6, fmt.Sprintf("exec 3<>/dev/tcp/::1/%d && head -c2 <&3 | grep -q hi", port6))
	}
	addNet("udp to the host's loopback", udp4, fmt.Sprintf(`python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); s.sendto(b"x", ("127.0.0.1", %d)); sys.exit(0 if s.recv(2)==b"hi" else 1)'`, portUDP))
	addNet("unix socket at a path to a host listener", unixPath, pyConnect("AF_UNIX", fmt.Sprintf("%q", hostSock)))
	addNet("abstract unix socket to a host listener", unixAbstract, pyConnect("AF_UNIX", fmt.Sprintf(`"\0%s"`, abstract[1:])))
	probes = append(probes,
		probe{name: "read /proc/<host pid>/environ", script: static(fmt.Sprintf(`[ "$(wc -c < /proc/%d/environ)" -gt 0 ]`, os.Getpid()))},
		probe{name: "kill a host-side process", script: func() string { return fmt.Sprintf("kill -9 %d", victim.Process.Pid) },
			escaped: func() string {
				select {
				case <-victimDone:
					return "the host-side sleep died"
				case <-time.After(300 * time.Millisecond):
					return ""
				}
			}, undo: func() {
				select {
				case <-victimDone:
					startVictim()
				default:
				}
			}},
		probe{name: "capabilities", script: static(`grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status && exit 1; grep CapEff /proc/self/status`), root: true},
		probe{name: "mount", script: static("mkdir -p mnt && mount -t tmpfs dsh-probe mnt"), root: true,
			escaped: func() string {
				b, _ := os.ReadFile("/proc/self/mountinfo")
				if strings.Contains(string(b), " "+mnt+" ") {
					return "mounted on the host"
				}
				return ""
			}, undo: func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) }},
		probe{name: "a nested user namespace", script: static("unshare -U true")},
		probe{name: "remove the host's SysV shared memory", script: func() string { return fmt.Sprintf("ipcrm -m %d", shm) },
			escaped: func() string {
				if _, err := unix.SysvShmCtl(shm, unix.IPC_STAT, &unix.SysvShmDesc{}); err != nil {
					return "the segment is gone"
				}
				return ""
			}, undo: func() {
				if _, err := unix.SysvShmCtl(shm, unix.IPC_STAT, &unix.SysvShmDesc{}); err != nil {
					newShm()
				}
			}},
	)
	if m.Cgroups() {
		probes = append(probes, probe{name: "leave the command's cgroup", root: true, script: static(
			`m=$(awk '{for(i=7;i<=NF;i++) if($i=="-"){ if($(i+1)=="cgroup2") print $5; break}}' /proc/self/mountinfo | head -1); ` +
				`cg=$(sed -n 's/^0:://p' /proc/self/cgroup); echo $$ > "$m$(dirname "$cg")/cgroup.procs"`)})
	}

	root := os.Geteuid() == 0
	cleanWS := func() {
		ents, _ := os.ReadDir(ws)
		for _, e := range ents {
			if e.Name() != ".git" && e.Name() != "README" && e.Name() != "bin" {
				_ = os.RemoveAll(filepath.Join(ws, e.Name()))
			}
		}
	}
	for _, pr := range probes {
		if pr.root && !root {
			t.Logf("%s: left out, it escapes only as root", pr.name)
			continue
		}
		if pr.undo != nil {
			pr.undo()
		}
		r := plain(pr.script())
		if r.ExitCode != 0 || !strings.Contains(string(r.Stdout.Data), pr.leak) {
			t.Fatalf("%s does not escape unconfined either: exit %d %q %q", pr.name, r.ExitCode, r.Stdout.Data, r.Stderr.Data)
		}
		if pr.escaped != nil && pr.escaped() == "" {
			t.Fatalf("%s: exit 0 unconfined but nothing changed outside", pr.name)
		}
		if pr.undo != nil {
			pr.undo()
		}
		if pr.escaped != nil && pr.escaped() != "" {
			t.Fatalf("%s: undo did not restore the outside world: %s", pr.name, pr.escaped())
		}
		cleanWS()
		// The marker shows the command ran: bwrap failing to set up would
		// refuse every probe and prove nothing.
		r = confined("echo probe-ran; " + pr.script())
		if !strings.HasPrefix(string(r.Stdout.Data), "probe-ran\n") {
			t.Fatalf("%s: the confined command did not run: exit %d %q %q", pr.name, r.ExitCode, r.Stdout.Data, r.Stderr.Data)
		}
		if r.ExitCode == 0 {
			t.Errorf("%s: exit 0 confined, want a failure (%q %q)", pr.name, r.Stdout.Data, r.Stderr.Data)
		} else {
			t.Logf("%s: refused: %s", pr.name, lastLine(r.Stderr.Data))
		}
		if pr.leak != "" && strings.Contains(string(r.Stdout.Data), pr.leak) {
			t.Errorf("%s: %q shows confined", pr.name, pr.leak)
		}
		if pr.escaped != nil {
			if what := pr.escaped(); what != "" {
				t.Errorf("%s: confined, still %s", pr.name, what)
			}
		}
		if pr.undo != nil {
			pr.undo()
		}
		cleanWS()
	}
	if now := files(); now != baseline {
		t.Errorf("the outside files changed:\n%s\nwant\n%s", now, baseline)
	}

	// What a command needs keeps working.
	works := []struct{ name, script, want string }{
		{"the working directory is kept", "pwd", ws},
		{"the exit code", "exit 3", ""},
		{"writes and moves inside the workspace", "echo inside > f && mkdir -p d/e && mv f d/e/g && mv d/e d/h && cat d/h/g && rm -r d && echo done", "inside\ndone"},
		{"git commit in the workspace's repository", "echo b > b && git add b && git -c user.name=t -c user.email=t@t commit -qm b && git log --oneline | wc -l", "2"},
		{"git init, add, commit in a new repository", "git init -q sub && cd sub && echo a > a && git add a && git -c user.name=t -c user.email=t@t commit -qm a && git log --oneline | wc -l", "1"},
		{"pipes", "seq 1000 | sort -rn | head -1", "1000"},
		{"the null and zero devices", "echo x > /dev/null && cat /dev/null && head -c 4 /dev/zero | wc -c", "4"},
		{"a PTY", `python3 -c 'import os,pty; m,s=pty.openpty(); os.write(s,b"hi\n"); print("ok" if b"hi" in os.read(m,16) else "no", os.ttyname(s).startswith("/dev/pts/"))'`, "ok True"},
		{"its own loopback server", `python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); c=socket.create_connection(s.getsockname()); a, _ = s.accept(); c.send(b"ok"); print(a.recv(2).decode())'`, "ok"},
		{"its own unix socket in the workspace", `python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.bind("own.sock"); s.listen(); c=socket.socket(socket.AF_UNIX); c.connect("own.sock"); a, _ = s.accept(); c.send(b"ok"); print(a.recv(2).decode())'`, "ok"},
		{"an allowed unix socket", pyConnect("AF_UNIX", fmt.Sprintf("%q", allowedSock)) + " && echo reached", "reached"},
		{"an allowed unix socket inside the hidden directory", pyConnect("AF_UNIX", fmt.Sprintf("%q", hiddenSock)) + " && echo reached", "reached"},
		{"reading outside the roots", "head -c 4 " + orig, "orig"},
		{"reading the shown spill files, and nothing else of the hidden directory", "cat " + spill + "/out.txt && ls " + rt + " " + rt + "/spill", "spilled\n" + rt + ":\nallowed.sock\nspill\n\n" + rt + "/spill:\ntest"},
		{"running the read-only plugin binary", "bin/dsh-plugin && echo ran", "ran"},
	}
	for _, w := range works {
		r := confined(w.script)
		want := 0
		if w.name == "the exit code" {
			want = 3
		}
		if r.ExitCode != want || strings.TrimSpace(string(r.Stdout.Data)) != w.want {
			t.Errorf("%s: exit %d %q %q, want exit %d %q", w.name, r.ExitCode, r.Stdout.Data, r.Stderr.Data, want, w.want)
		}
	}
	if allowedOut.got.Load() == 0 || allowedHidden.got.Load() == 0 {
		t.Errorf("the allowed sockets' listeners saw nothing: %d %d", allowedOut.got.Load(), allowedHidden.got.Load())
	}
	if now := files(); now != baseline {
		t.Errorf("the outside files changed by the working commands:\n%s\nwant\n%s", now, baseline)
	}

	// A confined command that times out, and one that is killed, take
	// their sandboxes with them; the next one runs as before.
	marker := fmt.Sprint(40000 + os.Getpid()%9999)
	spec := procs.Spec{Argv: []string{"bash", "-c", "sleep " + marker + " & setsid sleep " + marker + " & sleep " + marker}, Dir: ws, Owner: "test", Timeout: 300 * time.Millisecond, Grace: 100 * time.Millisecond}
	pr := spawnWrapped(t, m, b, p, sandbox.WorkspaceWrite, opt, spec)
	bounded.Receive(t, pr.Done(), "the process's end")
	if r := pr.Result(); !r.TimedOut {
		t.Fatalf("the confined timeout: %+v", r)
	}
	leftOver(t, marker, "a timeout")
	spec.Timeout = 0
	pr = spawnWrapped(t, m, b, p, sandbox.WorkspaceWrite, opt, spec)
	for deadline := time.Now().Add(30 * time.Second); len(testplugins.Matching("sleep "+marker)) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			pr.Kill()
			bounded.Receive(t, pr.Done(), "the process's end")
			r := pr.Result()
			t.Fatalf("the sleeps never started: %v: exit %d %q %q", testplugins.Matching("sleep "+marker), r.ExitCode, r.Stdout.Data, r.Stderr.Data)
		}
	}
	pr.Kill()
	bounded.Receive(t, pr.Done(), "the process's end")
	if r := pr.Result(); r.Status != procs.Killed {
		t.Errorf("the killed command: %+v", r)
	}
	leftOver(t, marker, "a kill")
	if r := confined("echo again > again && cat again"); r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout.Data)) != "again" {
		t.Fatalf("a confined command after a timeout and a kill: exit %d %q", r.ExitCode, r.Stderr.Data)
	}
}

// leftOver fails when a process running sleep marker is still there after
// what (pgrep when installed, /proc otherwise).
func leftOver(t *testing.T, marker, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left string
		if _, err := exec.LookPath("pgrep"); err == nil {
			out, _ := exec.Command("pgrep", "-af", "^sleep "+marker).Output()
			left = strings.TrimSpace(string(out))
		} else {
			left = strings.Join(testplugins.Matching("sleep "+marker), "; ")
		}
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, still running: %s", what, left)
		}
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// Read-only is read-only everywhere, the workspace too; with the network
// on, the host's loopback is reached.
func TestBubblewrapModes(t *testing.T) {
	b := findBwrap(t)
	m := newManager(t)
	ws := t.TempDir()
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{name: "tcp4"}
	l.serve(t, lis)
	p := &sandbox.Policy{DefaultMode: sandbox.ReadOnly, WorkspaceRoot: ws}
	if r := bwrapRun(t, m, b, p, sandbox.ReadOnly, Options{}, ws, "echo x > f"); r.ExitCode == 0 {
		t.Errorf("read-only: a write in the workspace succeeded")
	}
	if r := bwrapRun(t, m, b, p, sandbox.ReadOnly, Options{}, ws, "cat /etc/passwd >/dev/null"); r.ExitCode != 0 {
		t.Errorf("read-only: reading failed: %q", r.Stderr.Data)
	}
	p.Network = true
	if r := bwrapRun(t, m, b, p, sandbox.ReadOnly, Options{}, ws, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -c2 <&3", lis.Addr().(*net.TCPAddr).Port)); r.ExitCode != 0 || string(r.Stdout.Data) != "hi" {
		t.Errorf("network on: exit %d %q %q", r.ExitCode, r.Stdout.Data, r.Stderr.Data)
	}
}

// Wrap refuses what it cannot confine, and says why.
func TestBubblewrapWrapErrors(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	p := &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: t.TempDir()}
	for _, c := range []struct {
		name string
		b    *Bubblewrap
		p    *sandbox.Policy
		mode string
		opt  Options
		argv []string
		want string
	}{
		{"danger-full-access", b, p, sandbox.DangerFullAccess, Options{}, []string{"true"}, "run it without a confinement"},
		{"an unknown mode", b, p, "yolo", Options{}, []string{"true"}, `unknown sandbox mode "yolo"`},
		{"no argv", b, p, sandbox.WorkspaceWrite, Options{}, nil, "empty argv"},
		{"no policy", b, nil, sandbox.WorkspaceWrite, Options{}, []string{"true"}, "no sandbox policy"},
		{"no binary", &Bubblewrap{}, p, sandbox.WorkspaceWrite, Options{}, []string{"true"}, "no bwrap binary"},
		{"a relative root", b, &sandbox.Policy{WorkspaceRoot: "ws"}, sandbox.WorkspaceWrite, Options{}, []string{"true"}, `writable root "ws" is not absolute`},
		{"no workspace root", b, &sandbox.Policy{}, sandbox.WorkspaceWrite, Options{}, []string{"true"}, "without a workspace root"},
		{"a hidden file", b, p, sandbox.ReadOnly, Options{Hide: []string{"/etc/passwd"}}, []string{"true"}, "/etc/passwd is not a directory"},
	} {
		_, err := c.b.Wrap(c.p, c.mode, c.opt, c.argv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// Wrap's mounts come in an order where none covers a later one, and leave
// out what does not exist or is covered already.
func TestBubblewrapWrapArgs(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"inner", "show/sub"} {
		if err := os.MkdirAll(filepath.Join(hidden, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{".git/hooks", "a/b", "bin"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".git/config", "bin/plugin"} {
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(ws, filepath.Join(hidden, "link")); err != nil {
		t.Fatal(err)
	}
	p := &sandbox.Policy{
		WorkspaceRoot: filepath.Join(hidden, "link"), // resolved to ws
		WritableRoots: []string{ws + "/a", "/nonexistent-root"},
		// The ones missing are left out: nothing to bind.
		ProtectedPaths: []string{ws + "/.git/hooks", ws + "/.git/config", ws + "/.claude", ws + "/a/b", "/etc/hostname"},
	}
	opt := Options{
		Hide:     []string{hidden, hidden + "/inner", "/nonexistent-hide"},
		Show:     []string{hidden + "/show/sub", hidden + "/show", "/nonexistent-show"},
		ReadOnly: []string{ws + "/bin/plugin"},
	}
	argv, err := b.Wrap(p, sandbox.WorkspaceWrite, opt, []string{"cmd", "--flag"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	sockets := got[strings.Index(got, "--remount-ro "+hidden)+len("--remount-ro "+hidden):]
	got = strings.TrimSuffix(got, sockets)
	want := "/usr/bin/bwrap --unshare-user --disable-userns --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try --unshare-net --cap-drop ALL --new-session --die-with-parent --ro-bind / /" +
		" --bind " + ws + " " + ws + " --bind " + ws + "/a " + ws + "/a" +
		" --bind " + ws + "/.git " + ws + "/.git --bind " + ws + "/bin " + ws + "/bin" +
		" --ro-bind " + ws + "/.git/config " + ws + "/.git/config --ro-bind " + ws + "/.git/hooks " + ws + "/.git/hooks --ro-bind " + ws + "/a/b " + ws + "/a/b" +
		" --ro-bind " + ws + "/bin/plugin " + ws + "/bin/plugin" +
		" --dev /dev --proc /proc --tmpfs " + hidden + " --ro-bind " + hidden + "/show " + hidden + "/show --remount-ro " + hidden
	if got != want {
		t.Errorf("argv\n%s\nwant\n%s", got, want)
	}
	if !strings.HasSuffix(sockets, " -- cmd --flag") {
		t.Errorf("argv does not end in the command: %q", sockets)
	}
	for _, f := range strings.Fields(strings.TrimSuffix(sockets, " -- cmd --flag")) {
		if f != "--ro-bind" && f != "/dev/null" && !strings.HasPrefix(f, "/") {
			t.Errorf("after the hidden directories, only socket covers: %q", sockets)
			break
		}
	}
}

// Vanished tells bwrap's failure to mount a path of the command line from
// the command's own failures.
func TestBubblewrapVanished(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	argv := []string{"/usr/bin/bwrap", "--ro-bind", "/", "/", "--ro-bind", "/dev/null", "/tmp/x/s.sock", "--", "cat", "/tmp/y"}
	for _, c := range []struct {
		exit   int
		stderr string
		want   bool
	}{
		{1, "bwrap: Can't create file at /tmp/x/s.sock: Read-only file system\n", true},
		{1, "bwrap: Can't mkdir parents for /tmp/x/s.sock: Read-only file system\n", true},
		{1, "bwrap: Can't find source path /tmp/y: No such file or directory\n", false}, // not a mount's
		{1, "cat: /tmp/x/s.sock: No such file or directory\n", false},
		{2, "bwrap: Can't create file at /tmp/x/s.sock: Read-only file system\n", false},
		{1, "bwrap: Can't create file at /tmp/x/s.sock: Read-only file system\nmore\n", false},
	} {
		if got := b.Vanished(argv, c.exit, []byte(c.stderr)); got != c.want {
			t.Errorf("Vanished(exit %d, %q) = %v, want %v", c.exit, c.stderr, got, c.want)
		}
	}
}

// The host's unix sockets are covered once settled, but not the allowed
// ones (named, or under a named directory) nor the ones a hidden directory
// hides already (unless a shown directory brings them back).
func TestBubblewrapSocketCovers(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"allowed", "hidden/shown"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	socks := map[string]string{} // name -> path
	for _, name := range []string{"covered.sock", "named.sock", "allowed/in-dir.sock", "hidden/hidden.sock", "hidden/shown/shown.sock"} {
		path := filepath.Join(dir, name)
		lis, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		socks[name] = path
	}
	p := &sandbox.Policy{UnixSockets: []string{socks["named.sock"], dir + "/allowed"}}
	opt := Options{Hide: []string{dir + "/hidden"}, Show: []string{dir + "/hidden/shown"}}
	// Sockets this new are not covered yet (they may be gone by the start).
	argv, err := b.Wrap(p, sandbox.ReadOnly, opt, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(argv, " "); strings.Contains(got, "/dev/null "+dir) {
		t.Errorf("sockets made just now are covered: %s", got)
	}
	coverYoungSockets(t)
	argv, err = b.Wrap(p, sandbox.ReadOnly, opt, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	for name, path := range socks {
		covered := strings.Contains(got, "--ro-bind /dev/null "+path+" ")
		if covered != (name == "covered.sock" || name == "hidden/shown/shown.sock") {
			t.Errorf("%s covered: %v, want %v (%s)", name, covered, !covered, got)
		}
	}
}

// FindBubblewrap says why it cannot use bwrap: not installed, or unable
// to confine here (bwrap's own message).
func TestFindBubblewrapSaysWhy(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := FindBubblewrap(); err == nil || !strings.Contains(err.Error(), "install the bubblewrap package") {
		t.Errorf("without bwrap: %v", err)
	}
	fake := "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBubblewrap(); err == nil || !strings.Contains(err.Error(), "cannot confine here") || !strings.Contains(err.Error(), "No permissions to create a new namespace") {
		t.Errorf("with a bwrap that cannot confine: %v", err)
	}
	// A mounted path that went away fails one try, not the finding.
	flaky := "#!/bin/sh\nif [ ! -e " + dir + "/tried ]; then : > " + dir + "/tried; echo \"bwrap: Can't create file at /proc: Read-only file system\" >&2; exit 1; fi\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(flaky), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBubblewrap(); err != nil {
		t.Errorf("with a bwrap that fails once on a vanished path: %v", err)
	}
}

func TestSocketPaths(t *testing.T) {
	in := `Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 960137 /run/a.sock
0000000000000000: 00000002 00000000 00010000 0001 01 960138 @abstract
0000000000000000: 00000003 00000000 00000000 0001 03  1583
0000000000000000: 00000002 00000000 00010000 0005 01 960139 /tmp/with space.sock
0000000000000000: 00000002 00000000 00010000 0005 01 960140 relative.sock
`
	got, err := socketPaths(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/run/a.sock", "/tmp/with space.sock"}; !slices.Equal(got, want) {
		t.Errorf("socketPaths = %q, want %q", got, want)
	}
}

// BenchmarkBubblewrap is `true` through ctx.subprocess, plain and wrapped
// (Wrap included: it reads /proc/net/unix each time), one after the other
// in each round: the bubblewrap runner's cost per command.
func BenchmarkBubblewrap(b *testing.B) {
	bw := findBwrap(b)
	m := newManager(b)
	ws, rt := b.TempDir(), b.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git/config"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	p := &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: ws,
		ProtectedPaths: []string{ws + "/.git/config", ws + "/.git/hooks", ws + "/.claude", ws + "/.codex"}}
	opt := Options{Hide: []string{rt}}
	rule, err := newSocketRule()
	if err != nil {
		b.Fatal(err)
	}
	spawn := func(wrap bool, confine ...func() error) time.Duration {
		start := time.Now()
		argv := []string{"true"}
		if wrap {
			var err error
			if argv, err = bw.Wrap(p, sandbox.WorkspaceWrite, opt, argv); err != nil {
				b.Fatal(err)
			}
		}
		spec := procs.Spec{Argv: argv, Dir: ws, Owner: "bench"}
		if len(confine) > 0 {
			spec.Confine = confine[0]
		}
		pr, err := m.Spawn(spec)
		if err != nil {
			b.Fatal(err)
		}
		bounded.Receive(b, pr.Done(), "the process's end")
		if r := pr.Result(); r.ExitCode != 0 {
			b.Fatalf("exit %d: %s", r.ExitCode, r.Stderr.Data)
		}
		m.Forget(pr.ID)
		return time.Since(start)
	}
	var plain, wrapped, filtered, wraps []time.Duration
	for b.Loop() {
		plain = append(plain, spawn(false))
		wrapped = append(wrapped, spawn(true))
		filtered = append(filtered, spawn(true, rule.Confine))
		start := time.Now()
		if _, err := bw.Wrap(p, sandbox.WorkspaceWrite, opt, []string{"true"}); err != nil {
			b.Fatal(err)
		}
		wraps = append(wraps, time.Since(start))
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(float64(med(plain).Microseconds()), "plain-µs/median")
	b.ReportMetric(float64(med(wrapped).Microseconds()), "bwrap-µs/median")
	b.ReportMetric(float64((med(wrapped) - med(plain)).Microseconds()), "overhead-µs/median")
	// What the Runner adds: the unix socket filter, from a thread of its own.
	b.ReportMetric(float64((med(filtered) - med(wrapped)).Microseconds()), "socket-filter-µs/median")
	b.ReportMetric(float64(med(wraps).Microseconds()), "wrap-µs/median")
}
