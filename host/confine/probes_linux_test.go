package confine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/host/procs"
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
