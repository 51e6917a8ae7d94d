package confine

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
)

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
