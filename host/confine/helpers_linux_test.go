package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testneeds"
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

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
