//go:build linux

package procs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/sdk"
)

// testPrompt is the prompt of the shells these tests start: a mark no
// command prints, then "$ ".
const testPrompt = "\x1b]133;A;test\x07$ "

// shellOn starts an interactive bash on a terminal of m.
func shellOn(t *testing.T, m *Manager, mod func(*TerminalSpec)) *Terminal {
	t.Helper()
	spec := TerminalSpec{
		Argv:  []string{"bash", "--norc", "--noprofile", "-i"},
		Dir:   t.TempDir(),
		Env:   map[string]string{"PS1": `\[\e]133;A;test\a\]$ `, "HISTFILE": "", "TERM": "xterm"},
		Owner: "agent",
	}
	if mod != nil {
		mod(&spec)
	}
	term, err := m.SpawnTerminal(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = term.Close(ctx)
	})
	return term
}

// readTo reads term until what was read holds want, and returns what
// came up to its end; the rest stays in all for the next call.
func readTo(t *testing.T, term *Terminal, all *bytes.Buffer, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if i := strings.Index(all.String(), want); i >= 0 {
			out := string(all.Next(i + len(want)))
			return out
		}
		r := term.Read(ctx, time.Second)
		all.Write(r.Data)
		if r.Status != Running && len(r.Data) == 0 && !strings.Contains(all.String(), want) {
			t.Fatalf("the terminal ended (%s, %d) before %q; read %q", r.Status, r.ExitCode, want, all.String())
		}
	}
	t.Fatalf("no %q in %q", want, all.String())
	return ""
}

// run types cmd and reads until it has run: its output is followed by a
// mark the typed line itself does not show.
func run(t *testing.T, term *Terminal, all *bytes.Buffer, cmd string) string {
	t.Helper()
	write(t, term, cmd+"; echo RAN-\"\"DONE\r")
	return readTo(t, term, all, "RAN-DONE\r\n")
}

func write(t *testing.T, term *Terminal, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ok, err := term.Write(ctx, []byte(s)); !ok || err != nil {
		t.Fatalf("write %q: %v %v", s, ok, err)
	}
}

// A shell on a terminal: it is interactive, the terminal is its
// controlling one and has the size asked for (and the next after a
// resize), input typed is run, and its exit is the terminal's end.
func TestTerminalShell(t *testing.T) {
	m := newManager(t)
	term := shellOn(t, m, func(s *TerminalSpec) { s.Cols, s.Rows = 100, 30 })
	var all bytes.Buffer
	readTo(t, term, &all, testPrompt)
	out := run(t, term, &all, "[ -t 0 ] && [ -t 1 ] && echo on-a-tty; stty size; exec 3</dev/tty && echo has-tty")
	for _, want := range []string{"on-a-tty\r\n", "30 100\r\n", "has-tty\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in %q", want, out)
		}
	}
	if c, r := term.Size(); c != 100 || r != 30 {
		t.Errorf("size %dx%d", c, r)
	}
	if err := term.Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	if out := run(t, term, &all, "stty size"); !strings.Contains(out, "40 120\r\n") {
		t.Errorf("after the resize: %q", out)
	}
	if err := term.Resize(0, 5000); err == nil {
		t.Error("a resize out of range was accepted")
	}
	// The terminal's session is its own, led by the shell.
	out = run(t, term, &all, "ps -o sid=,pgid= -p $$")
	// ps pads its columns to the widest pid it might show: compare the
	// fields of each line.
	pid := strconv.Itoa(term.Pid())
	if !slices.ContainsFunc(strings.FieldsFunc(out, func(r rune) bool { return r == '\r' || r == '\n' }), func(l string) bool { return slices.Equal(strings.Fields(l), []string{pid, pid}) }) {
		t.Errorf("session and group of the shell (pid %d): %q", term.Pid(), out)
	}
	// Input takes what answers the program from the host.
	if n, err := term.Input().Write([]byte("echo via-\"\"input\r")); n != len("echo via-\"\"input\r") || err != nil {
		t.Fatalf("input: %d %v", n, err)
	}
	readTo(t, term, &all, "via-input\r\n")
	write(t, term, "exit 3\r")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-term.Done():
	case <-ctx.Done():
		t.Fatal("the shell did not exit")
	}
	r := term.Read(ctx, time.Second)
	if r.Status != Completed || r.ExitCode != 3 {
		t.Fatalf("after exit 3: %+v", r)
	}
	if ok, err := term.Write(ctx, []byte("echo late\r")); ok || err != nil {
		t.Errorf("a write after the end: %v %v", ok, err)
	}
	if _, err := term.Input().Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("input after the end: %v", err)
	}
	if _, ok, err := term.Signal(syscall.SIGINT, false); ok || err != nil {
		t.Errorf("a signal after the end: %v %v", ok, err)
	}
}

// SIGINT to the foreground process group interrupts what the shell runs
// in the foreground, not the shell.
func TestTerminalForegroundSignal(t *testing.T) {
	m := newManager(t)
	term := shellOn(t, m, nil)
	var all bytes.Buffer
	readTo(t, term, &all, testPrompt)
	if fg, err := term.Foreground(); err != nil || fg != term.Pid() {
		t.Fatalf("foreground at the prompt: %d %v (shell %d)", fg, err, term.Pid())
	}
	write(t, term, "sleep 4242\r")
	// The job is in the foreground once its leader runs sleep: before its
	// exec it is the shell's child, with the shell's handling of SIGINT,
	// and a SIGINT then leaves sleep to run on. (On a loaded machine that
	// window is wide.)
	var fg int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if g, err := term.Foreground(); err == nil && g != term.Pid() {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(g) + "/cmdline"); strings.HasPrefix(string(b), "sleep\x00") {
				fg = g
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep never came to the foreground")
		}
	}
	pid, ok, err := term.Signal(syscall.SIGINT, false)
	if err != nil || !ok || pid != fg {
		t.Fatalf("signal: %d %v %v (foreground %d)", pid, ok, err, fg)
	}
	// Typed before the shell has its prompt back, a line can be lost (the
	// line editor drops what was typed during the interrupted job).
	readTo(t, term, &all, testPrompt)
	if out := run(t, term, &all, "echo status=$?"); !strings.Contains(out, "status=130\r\n") {
		t.Fatalf("after SIGINT: %q", out)
	}
	if st, _, _ := term.State(); st != Running {
		t.Fatal("the shell died of its foreground job's SIGINT")
	}
	// To the shell itself.
	if pid, ok, err := term.Signal(syscall.SIGTERM, true); err != nil || !ok || pid != term.Pid() {
		t.Fatalf("signal to the shell: %d %v %v", pid, ok, err)
	}
}

// Closing a terminal ends its whole tree, setsid and nohup children
// included, and waits until they are gone.
func TestTerminalCloseTakesTree(t *testing.T) {
	m := newManager(t)
	if !m.Cgroups() {
		t.Skip("no cgroups here: setsid children escape a process group")
	}
	term := shellOn(t, m, nil)
	var all bytes.Buffer
	readTo(t, term, &all, testPrompt)
	write(t, term, "setsid sleep 7311 & nohup sleep 7312 >/dev/null 2>&1 & disown -a; echo started\r")
	readTo(t, term, &all, "started\r\n")
	for deadline := time.Now().Add(10 * time.Second); len(testplugins.Matching("sleep 731")) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the children did not start: %v", testplugins.Matching("sleep 731"))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := term.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := testplugins.Matching("sleep 731"); len(left) > 0 {
		t.Fatalf("left after close: %v", left)
	}
	if testplugins.Alive(term.Pid()) {
		t.Fatal("the shell is alive after close")
	}
}

// An observer sees every byte the terminal printed, in order, the bytes
// printed before it came included; reads are not affected by it.
func TestTerminalObserve(t *testing.T) {
	m := newManager(t)
	term := shellOn(t, m, nil)
	var all bytes.Buffer
	readTo(t, term, &all, testPrompt)
	var seen syncbuf.Buffer
	// What was read is gone; what is unread reaches the observer first.
	run(t, term, &all, "echo one")
	term.Observe(&seen)
	run(t, term, &all, "seq 1 2000")
	readTo(t, term, &all, testPrompt)
	got := seen.String()
	if !strings.Contains(got, "1999\r\n2000\r\nRAN-DONE\r\n") || !strings.Contains(got[strings.LastIndex(got, "RAN-DONE"):], testPrompt) || strings.Contains(got, "echo one") {
		t.Fatalf("the observer saw …%q", got[max(0, len(got)-200):])
	}
}

// Unread output beyond the buffer is dropped oldest first and counted
// exactly.
func TestTerminalBufferDrops(t *testing.T) {
	m := newManager(t)
	term := shellOn(t, m, func(s *TerminalSpec) {
		s.Argv = []string{"bash", "-c", "head -c 100000 /dev/zero | tr '\\0' x; printf END"}
		s.MaxBufferBytes = 1000
	})
	bounded.Receive(t, term.Done(), "the terminal's end")
	r := term.Read(context.Background(), 0)
	if r.Total != 100003 || r.Dropped+int64(len(r.Data)) != r.Total || len(r.Data) != 1000 || !strings.HasSuffix(string(r.Data), "xEND") {
		t.Fatalf("read: total %d dropped %d data %d …%q", r.Total, r.Dropped, len(r.Data), r.Data[max(0, len(r.Data)-10):])
	}
	if r.Status != Completed || r.ExitCode != 0 {
		t.Fatalf("status: %+v", r.Status)
	}
	if r := term.Read(context.Background(), 0); len(r.Data) != 0 || r.Dropped != 0 {
		t.Fatalf("a second read: %+v", r)
	}
}

// A write to a program that reads nothing waits for the caller, and no
// longer; a read waits for output as long as asked.
func TestTerminalWaits(t *testing.T) {
	m := newManager(t)
	// In raw mode the terminal's input queue fills (a canonical one
	// drops what a line cannot hold).
	term := shellOn(t, m, func(s *TerminalSpec) { s.Argv = []string{"bash", "-c", "stty raw -echo; echo raw; sleep 30"} })
	var all bytes.Buffer
	readTo(t, term, &all, "raw")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	ok, err := term.Write(ctx, bytes.Repeat([]byte("y"), 1<<20))
	if ok || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("a write nobody reads: %v %v after %v", ok, err, time.Since(start))
	}
	start = time.Now()
	if r := term.Read(context.Background(), 200*time.Millisecond); len(r.Data) != 0 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("a read with nothing to read: %+v after %v", r, time.Since(start))
	}
}

// A terminal's descriptors stay the host's: a command started after it
// holds no terminal master.
func TestTerminalMasterNotInherited(t *testing.T) {
	m := newManager(t)
	shellOn(t, m, nil)
	r := bash(t, m, "ls -l /proc/$$/fd", nil)
	if strings.Contains(string(r.Stdout.Data), "ptmx") {
		t.Fatalf("a command holds a terminal master:\n%s", r.Stdout.Data)
	}
}

// Terminals are processes of their owner: an owner's release and the
// manager's close end them, and a closed manager starts none.
func TestTerminalOwnersAndClose(t *testing.T) {
	m := newManager(t)
	a := shellOn(t, m, func(s *TerminalSpec) { s.Owner = "a" })
	b := shellOn(t, m, func(s *TerminalSpec) { s.Owner = "b" })
	if _, err := m.Terminal("b", a.ID()); err == nil {
		t.Fatal("another owner got the terminal")
	}
	if got, err := m.Terminal("a", a.ID()); err != nil || got != a {
		t.Fatalf("own terminal: %v %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.ReleaseOwner(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("a released owner's terminal lives on")
	}
	if testplugins.Alive(b.Pid()) == false {
		t.Fatal("another owner's terminal died")
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	default:
		t.Fatal("a terminal outlived its manager")
	}
	if _, err := m.SpawnTerminal(TerminalSpec{Argv: []string{"bash"}, Dir: t.TempDir(), Owner: "a"}); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("a spawn after close: %v", err)
	}
}

// What a failed call left behind (spawned under it, never claimed) is
// closed; a claimed terminal, or another call's, is not.
func TestCloseUnclaimed(t *testing.T) {
	m := newManager(t)
	left := shellOn(t, m, func(s *TerminalSpec) { s.Call = "c1" })
	kept := shellOn(t, m, func(s *TerminalSpec) { s.Call = "c1" })
	other := shellOn(t, m, func(s *TerminalSpec) { s.Call = "c2" })
	if !kept.Claim() || kept.Claim() {
		t.Fatal("claim")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.CloseUnclaimed(ctx, "agent", "c1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		term *Terminal
		gone bool
	}{{left, true}, {kept, false}, {other, false}} {
		select {
		case <-c.term.Done():
			if !c.gone {
				t.Errorf("%s was closed", c.term.ID())
			}
		default:
			if c.gone {
				t.Errorf("%s was left", c.term.ID())
			}
		}
	}
	if _, err := m.Terminal("", left.ID()); err == nil {
		t.Error("a closed leftover is still in the table")
	}
}

// ctx.subprocess's terminal half as a plugin reaches it: the owner is the
// host's stamp, another owner's terminal is not there, a held terminal is
// read by its holder alone, and each refusal has its code.
func TestTerminalServer(t *testing.T) {
	m := newManager(t)
	stamp := grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(context.WithValue(ctx, ownerKey{}, "agent"), req)
	})
	conn := seamtest.Conn(t, func(s *grpc.Server) {
		subprocessv1.RegisterSubprocessServer(s, subprocess.NewServer(&Service{M: m, Caller: "term", Serving: func(ctx context.Context) (seam.Served, bool) {
			o, ok := ctx.Value(ownerKey{}).(string)
			return seam.Served{Owner: o}, ok
		}}))
	}, stamp)
	c := subprocess.NewClient(conn)
	ctx := context.Background()
	st, err := c.SpawnTerminal(ctx, &subprocess.TerminalRequest{
		Argv: []string{"bash", "--norc", "--noprofile", "-i"}, Dir: t.TempDir(), Owner: "someone-else",
		Env: map[string]string{"PS1": `\[\e]133;A;test\a\]$ `, "HISTFILE": ""}, Cols: 90, Rows: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	term, err := m.Terminal("agent", st.Id)
	if err != nil || int(st.Pid) != term.Pid() {
		t.Fatalf("the spawned terminal is not the caller's: %v %v", term, err)
	}
	read := func() string {
		var all strings.Builder
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.HasSuffix(all.String(), testPrompt); {
			r, err := c.ReadTerminal(ctx, st.Id, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(r.Data)
		}
		return all.String()
	}
	read()
	if ok, err := c.WriteTerminal(ctx, st.Id, []byte("stty size\r")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if out := read(); !strings.Contains(out, "20 90") {
		t.Fatalf("stty size: %q", out)
	}
	if err := c.ResizeTerminal(ctx, st.Id, 0, 2000); !errors.Is(err, subprocess.ErrInvalid) {
		t.Errorf("a resize out of range: %v", err)
	}
	if _, err := c.SignalTerminal(ctx, st.Id, "SIGBOGUS", subprocess.TargetForeground); !errors.Is(err, subprocess.ErrInvalid) || !strings.Contains(err.Error(), "SIGINT") {
		t.Errorf("an unknown signal: %v", err)
	}
	if sg, err := c.SignalTerminal(ctx, st.Id, "SIGWINCH", subprocess.TargetForeground); err != nil || !sg.Signalled || int(sg.Pid) != term.Pid() {
		t.Errorf("a signal to the foreground at the prompt: %v %v", sg, err)
	}
	if _, err := c.SpawnTerminal(ctx, &subprocess.TerminalRequest{Argv: []string{"bash"}, Dir: t.TempDir(), Cols: 5000}); !errors.Is(err, subprocess.ErrInvalid) {
		t.Errorf("a terminal out of range: %v", err)
	}
	if _, err := c.SpawnTerminal(ctx, &subprocess.TerminalRequest{Argv: []string{"bash"}, Dir: "/nowhere"}); !errors.Is(err, subprocess.ErrCannotStart) {
		t.Errorf("a terminal in no folder: %v", err)
	}
	// A process that is no terminal, and another owner's terminal.
	plain, err := c.Start(ctx, &subprocess.SpawnRequest{Argv: []string{"sleep", "30"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(ctx, plain.Id)
	if _, err := c.WriteTerminal(ctx, plain.Id, []byte("x")); !errors.Is(err, subprocess.ErrInvalid) {
		t.Errorf("a write to a process that is no terminal: %v", err)
	}
	theirs := shellOn(t, m, func(s *TerminalSpec) { s.Owner = "other" })
	if _, err := c.WriteTerminal(ctx, theirs.ID(), []byte("x")); !errors.Is(err, subprocess.ErrNotFound) {
		t.Errorf("a write to another owner's terminal: %v", err)
	}
	if _, err := c.ReadTerminal(ctx, theirs.ID(), 0); !errors.Is(err, subprocess.ErrNotFound) {
		t.Errorf("a read of another owner's terminal: %v", err)
	}
	// Held: read by its holder alone.
	term.Claim()
	if _, err := c.ReadTerminal(ctx, st.Id, 0); !errors.Is(err, sdk.ErrPermissionDenied) || !strings.Contains(err.Error(), "ctx.terminals") {
		t.Errorf("a read of a held terminal: %v", err)
	}
	// Kill and Wait take a terminal's id as any process's.
	if killed, err := c.Kill(ctx, st.Id); !killed || err != nil {
		t.Fatal(killed, err)
	}
	if r, err := c.Wait(ctx, st.Id); err != nil || r.Status != subprocessv1.Status_STATUS_KILLED {
		t.Fatalf("wait: %v %v", r, err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(term.Pid())); err == nil && testplugins.Alive(term.Pid()) {
		t.Fatal("the killed terminal's shell lives")
	}
}

// A confined terminal is forked from the thread its confinement
// restricted, and only its tree is restricted; a confinement that fails
// starts nothing.
func TestTerminalConfined(t *testing.T) {
	m := newManager(t)
	term := shellOn(t, m, func(s *TerminalSpec) {
		s.Confine = func() error { return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }
	})
	var all bytes.Buffer
	readTo(t, term, &all, testPrompt)
	if out := run(t, term, &all, "grep NoNewPrivs /proc/$$/status"); !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Fatalf("the confined shell: %q", out)
	}
	if r := bash(t, m, "grep NoNewPrivs /proc/$$/status", nil); !strings.Contains(string(r.Stdout.Data), "NoNewPrivs:\t0") {
		t.Fatalf("a command after it: %q", r.Stdout.Data)
	}
	_, err := m.SpawnTerminal(TerminalSpec{
		Argv: []string{"bash"}, Dir: t.TempDir(), Owner: "agent",
		Confine: func() error { return errors.New("no ruleset") },
	})
	if !errors.Is(err, ErrConfine) || !strings.Contains(err.Error(), "no ruleset") {
		t.Fatalf("a confinement that fails: %v", err)
	}
	if n := len(m.Terminals("agent")); n != 1 {
		t.Fatalf("%d terminals after the failed one", n)
	}
}

// An interrupt discards the input typed and not read yet, as Ctrl-C does:
// what waits in the terminal's queue, and the rest of a write that waits
// for room (the program in front reads nothing), which stops and counts as
// typed. Nothing of it runs once the shell has its prompt back.
func TestTerminalInterruptDiscardsInput(t *testing.T) {
	m := newManager(t)
	term := shellOn(t, m, nil)
	var all bytes.Buffer
	readTo(t, term, &all, testPrompt)
	marker := t.TempDir() + "/marker"
	write(t, term, "sleep 4242\r")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if g, err := term.Foreground(); err == nil && g != term.Pid() {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(g) + "/cmdline"); strings.HasPrefix(string(b), "sleep\x00") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep never came to the foreground")
		}
	}
	// More lines than the terminal holds: the write waits for room.
	typed := strings.Repeat("true\r", 40000) + "touch " + marker + "\r"
	wrote := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*bounded.Bound)
		defer cancel()
		ok, err := term.Write(ctx, []byte(typed))
		if err == nil && !ok {
			err = errors.New("nothing written: the terminal had ended")
		}
		wrote <- err
	}()
	// Some of it is in the queue (the terminal echoes what it takes).
	readTo(t, term, &all, "true")
	if _, ok, err := term.Interrupt(syscall.SIGINT); !ok || err != nil {
		t.Fatalf("interrupt: %v %v", ok, err)
	}
	if err := bounded.Receive(t, wrote, "the end of the write the interrupt stopped"); err != nil {
		t.Fatalf("the write the interrupt stopped: %v", err)
	}
	// Had a line typed ahead run, $? would be true's 0, not sleep's 130.
	all.Reset()
	if out := run(t, term, &all, "echo status=$?"); !strings.Contains(out, "status=130\r\n") {
		t.Fatalf("after the interrupt, lines typed ahead ran; the end of the output: %q", out[max(0, len(out)-300):])
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the last line typed ahead ran after the interrupt")
	}
}
