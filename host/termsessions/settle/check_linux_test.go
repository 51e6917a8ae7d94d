package settle

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/internal/testneeds"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// shell is an interactive bash on a real PTY, its output drained (and
// kept, for failures) as a terminal would take it.
type shell struct {
	t    *testing.T
	ptmx *os.File
	cmd  *exec.Cmd
	dir  string
	mu   sync.Mutex
	out  []byte
	done chan struct{}
}

func startShell(t testing.TB) *shell {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("bash", "--norc", "--noprofile")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"PS1=$ ",
		"HISTFILE=/dev/null",
		"LESSHISTFILE=-",
		"NODE_REPL_HISTORY=",
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatalf("start bash on a PTY: %v", err)
	}
	sh := &shell{ptmx: ptmx, cmd: cmd, dir: dir, done: make(chan struct{})}
	if tt, ok := t.(*testing.T); ok {
		sh.t = tt
	}
	go func() {
		defer close(sh.done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			sh.mu.Lock()
			sh.out = append(sh.out, buf[:n]...)
			if len(sh.out) > 1<<16 {
				sh.out = sh.out[len(sh.out)-1<<15:]
			}
			sh.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		// The session's processes, jobs in other groups too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		killSession(cmd.Process.Pid)
		_ = cmd.Wait()
		_ = ptmx.Close()
		select {
		case <-sh.done:
		case <-time.After(30 * time.Second):
			t.Error("the PTY reader did not end within 30s of the shell's end")
		}
	})
	return sh
}

// killSession kills what is left of a session: background jobs have
// groups of their own.
func killSession(sid int) {
	procs, _ := listProcs()
	for _, p := range procs {
		if p.session == sid {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}

func (sh *shell) output() string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return string(sh.out)
}

func (sh *shell) send(s string) {
	sh.t.Helper()
	if _, err := sh.ptmx.WriteString(s); err != nil {
		sh.t.Fatalf("write to the PTY: %v", err)
	}
}

func (sh *shell) check() Result {
	sh.t.Helper()
	r, err := Check(sh.ptmx, sh.cmd.Process.Pid)
	if err != nil {
		sh.t.Fatalf("Check: %v", err)
	}
	return r
}

// waitFor checks until ok holds and returns that result.
func (sh *shell) waitFor(what string, ok func(Result) bool) Result {
	sh.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var r Result
	for {
		r = sh.check()
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			out := sh.output()
			sh.t.Fatalf("timed out waiting for %s; last result %v %q (process %v)\noutput: %q", what, r.Reason, r.Detail, r.Process, out[max(0, len(out)-400):])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expect waits for reason from a process named comm, told the way the
// detail says (a program passes through other states as it starts).
func (sh *shell) expect(reason Reason, comm, detail string) Result {
	sh.t.Helper()
	r := sh.waitFor(fmt.Sprintf("%v from %s saying %q", reason, comm, detail), func(r Result) bool {
		return r.Reason == reason && r.Process.Command == comm && strings.Contains(r.Detail, detail)
	})
	sh.t.Logf("%v: %s", r.Reason, r.Detail)
	return r
}

// stays checks, for a while, that the result does not change to another
// reason: a wrong StdinRead would end a wait for output early.
func (sh *shell) stays(reason Reason, d time.Duration) {
	sh.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		if r := sh.check(); r.Reason != reason {
			sh.t.Fatalf("result changed to %v: %s", r.Reason, r.Detail)
		}
	}
}

// atPrompt waits for bash to wait at its prompt.
func (sh *shell) atPrompt() Result {
	sh.t.Helper()
	return sh.expect(StdinRead, "bash", "the terminal")
}

func need(t *testing.T, name string) {
	t.Helper()
	testneeds.Command(t, name)
}

func TestBashPrompt(t *testing.T) {
	sh := startShell(t)
	r := sh.expect(StdinRead, "bash", "pselect6 with the terminal (fd 0) in its read set")
	if r.Pgrp != sh.cmd.Process.Pid {
		t.Errorf("Pgrp = %d, want the shell's %d", r.Pgrp, sh.cmd.Process.Pid)
	}
	if r.Canonical || r.Echo {
		t.Errorf("readline's terminal: canonical %v echo %v, want both off", r.Canonical, r.Echo)
	}
	if len(r.StoppedJobs) != 0 {
		t.Errorf("StoppedJobs = %v", r.StoppedJobs)
	}
}

func TestReadBuiltin(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send(`read -p "name? " x` + "\r")
	r := sh.expect(StdinRead, "bash", "read on fd 0 (/dev/pts/")
	if !r.Canonical || !r.Echo {
		t.Errorf("canonical %v echo %v, want both on", r.Canonical, r.Echo)
	}
}

func TestPasswordPrompt(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send(`read -s -p "password: " x` + "\r")
	r := sh.expect(StdinRead, "bash", "echo is off")
	if !r.Canonical || r.Echo {
		t.Errorf("canonical %v echo %v, want canonical without echo", r.Canonical, r.Echo)
	}
}

func TestCat(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send("cat\r")
	r := sh.expect(StdinRead, "cat", "read on fd 0 (/dev/pts/")
	if r.Pgrp == sh.cmd.Process.Pid {
		t.Error("cat's job is the shell's group")
	}
}

func TestPythonInput(t *testing.T) {
	need(t, "python3")
	sh := startShell(t)
	sh.atPrompt()
	sh.send(`python3 -c 'input("name? ")'` + "\r")
	sh.expect(StdinRead, "python3", "read on fd 0 (/dev/pts/")
}

func TestPythonREPL(t *testing.T) {
	need(t, "python3")
	sh := startShell(t)
	sh.atPrompt()
	sh.send("python3 -q\r")
	sh.expect(StdinRead, "python3", "select")
}

func TestNodeREPL(t *testing.T) {
	need(t, "node")
	sh := startShell(t)
	sh.atPrompt()
	sh.send("node\r")
	sh.expect(StdinRead, "node", "epoll_pwait")
}

// poll(2) on the terminal; Python's select.poll calls it.
func TestPoll(t *testing.T) {
	need(t, "python3")
	sh := startShell(t)
	sh.atPrompt()
	sh.send(`python3 -c 'import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()'` + "\r")
	r := sh.expect(StdinRead, "python3", "poll with the terminal (fd 0) among its descriptors")
	if len(r.Others) != 0 {
		t.Errorf("Others = %v", r.Others)
	}
}

// A wait on the terminal and a socket at once, as ssh's: StdinRead, and
// the socket is named.
func TestWaitOnTerminalAndSocket(t *testing.T) {
	need(t, "python3")
	sh := startShell(t)
	sh.atPrompt()
	sh.send(`python3 -c 'import select, socket; a, b = socket.socketpair(); select.select([0, a], [], [])'` + "\r")
	r := sh.expect(StdinRead, "python3", "it also waits on 1 other descriptor: fd 3 (socket:[")
	if len(r.Others) != 1 || !strings.HasPrefix(r.Others[0], "fd 3 (socket:[") {
		t.Errorf("Others = %v", r.Others)
	}
}

// select, poll and epoll on a pipe are waits, but not on the terminal.
func TestSelectPollEpollOnAPipe(t *testing.T) {
	need(t, "python3")
	for _, c := range []struct{ name, cmd, comm, detail string }{
		{"select", `python3 -c 'import select; select.select([0], [], [])'`, "python3", "pselect6 on fds [0], none the terminal"},
		{"poll", `python3 -c 'import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()'`, "python3", "poll reading fds [0], none the terminal"},
		{"epoll", `python3 -c 'import select; e = select.epoll(); e.register(0, select.EPOLLIN); e.poll()'`, "python3", "watching fds [0], none the terminal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sh := startShell(t)
			sh.atPrompt()
			sh.send("sleep 100 | " + c.cmd + "\r")
			sh.expect(Running, c.comm, c.detail)
			sh.stays(Running, 200*time.Millisecond)
		})
	}
}

// epoll keeps watching a file after its descriptor number was closed, if
// another descriptor holds it; fdinfo still names the old number. Here that
// number is the terminal now, but the pipe is what epoll watches.
func TestEpollStaleDescriptor(t *testing.T) {
	need(t, "python3")
	sh := startShell(t)
	sh.atPrompt()
	sh.send(`python3 -c $'import os, select\nr, w = os.pipe(); e = select.epoll(); e.register(r, select.EPOLLIN)\nkeep = os.dup(r); os.dup2(0, r)\ne.poll()'` + "\r")
	sh.expect(Running, "python3", "watching fds [], none the terminal")
	sh.stays(Running, 200*time.Millisecond)
}

// A loop that polls the terminal with a short timeout is found in the same
// call at both looks, but it ran in between: not a quiet wait.
func TestPollingLoop(t *testing.T) {
	need(t, "python3")
	sh := startShell(t)
	sh.atPrompt()
	sh.send(`python3 -c $'import select\nwhile True: select.select([0], [], [], 0.001)'` + "\r")
	sh.expect(Running, "python3", "between two looks")
	// Not asked to stay so: on a loaded machine the loop may sleep through
	// both looks of a check (seen beside a second make test), which then
	// tells a quiet wait; a settle looks again until the wait runs out.
}

func writeFile(t *testing.T, dir, name string) {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLess(t *testing.T) {
	need(t, "less")
	sh := startShell(t)
	writeFile(t, sh.dir, "file.txt")
	sh.atPrompt()
	sh.send("less file.txt\r")
	// less opens the terminal again for its keys (here as /dev/pts/N).
	sh.expect(StdinRead, "less", "less: read on fd 3 (/dev/pts/")
}

// A read of /dev/tty is a read of the process's controlling terminal.
func TestReadDevTTY(t *testing.T) {
	need(t, "python3")
	sh := startShell(t)
	sh.atPrompt()
	sh.send(`python3 -c 'import os; os.read(os.open("/dev/tty", os.O_RDONLY), 1)' < /dev/null` + "\r")
	sh.expect(StdinRead, "python3", "(/dev/tty, the controlling terminal /dev/pts/")
}

func TestVim(t *testing.T) {
	need(t, "vim")
	sh := startShell(t)
	writeFile(t, sh.dir, "file.txt")
	sh.atPrompt()
	sh.send("vim -u NONE -i NONE -N file.txt\r")
	sh.expect(StdinRead, "vim", "the terminal")
}

func TestSleep(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send("sleep 30\r")
	if r := sh.expect(Running, "sleep", "clock_nanosleep"); r.Busy {
		t.Errorf("a sleeping foreground is busy: %s", r.Detail)
	}
	sh.stays(Running, 300*time.Millisecond)
}

// cat reads a pipe, not the terminal: the read looks the same in
// /proc/PID/syscall and wchan, and only the descriptor tells them apart.
func TestCatReadingAPipe(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send("sleep 100 | cat\r")
	sh.expect(Running, "cat", "read on fd 0 (pipe:[")
	sh.stays(Running, 300*time.Millisecond)
}

func TestBusyLoop(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send("while :; do :; done\r")
	if r := sh.expect(Running, "bash", "running ("); !r.Busy {
		t.Errorf("a busy loop is not busy: %s", r.Detail)
	}
	sh.stays(Running, 300*time.Millisecond)
}

// A shell that runs outside the foreground (starting a job, on a loaded
// machine) makes the result busy, though the foreground itself sleeps.
func TestBusyShellOutsideTheForeground(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send("sleep 30\r")
	sh.expect(Running, "sleep", "clock_nanosleep")
	// A process busy on a CPU stands for the shell: the real one waits for
	// its job here.
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })
	var r Result
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if r, err = Check(sh.ptmx, busy.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if r.Busy || time.Now().After(deadline) {
			break
		}
	}
	if !r.Busy || r.Reason != Running || !strings.Contains(r.Detail, fmt.Sprintf("the shell (pid %d) is running (state R)", busy.Process.Pid)) {
		t.Fatalf("a busy shell outside the foreground: busy %v %v %q", r.Busy, r.Reason, r.Detail)
	}
}

// Without job control the shell and its command share a group, and a
// command that stops stays in the foreground.
func TestStoppedForeground(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send("set +m\r")
	sh.atPrompt()
	sh.send("sleep 100\r")
	r := sh.expect(Running, "sleep", "clock_nanosleep")
	if err := syscall.Kill(r.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	sh.expect(Stopped, "sleep", "stopped (state T)")
	sh.stays(Stopped, 200*time.Millisecond)
	_ = syscall.Kill(r.Process.Pid, syscall.SIGCONT)
	sh.expect(Running, "sleep", "restart_syscall")
}

// A job control shell takes the terminal back from a job that stops: the
// foreground is its prompt, and the stopped job is listed.
func TestStoppedJob(t *testing.T) {
	sh := startShell(t)
	sh.atPrompt()
	sh.send("cat &\r") // reading the terminal from the background: SIGTTIN
	r := sh.waitFor("cat stopped in the background", func(r Result) bool {
		return r.Reason == StdinRead && r.Process.Command == "bash" && len(r.StoppedJobs) == 1
	})
	if r.StoppedJobs[0].Command != "cat" {
		t.Errorf("StoppedJobs = %v", r.StoppedJobs)
	}

	sh.send("sleep 100\r")
	r = sh.expect(Running, "sleep", "clock_nanosleep")
	if err := syscall.Kill(r.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r = sh.waitFor("sleep stopped too", func(r Result) bool {
		return r.Reason == StdinRead && len(r.StoppedJobs) == 2
	})
	t.Logf("%v: %s; stopped jobs %v", r.Reason, r.Detail, r.StoppedJobs)

	// fg brings cat back: it reads the terminal in the foreground.
	sh.send("fg %1\r")
	sh.expect(StdinRead, "cat", "read on fd 0")
}

func TestNotAPTYMaster(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := Check(r, 0); err == nil || !strings.Contains(err.Error(), "not a PTY master") {
		t.Errorf("Check(pipe) = %v, want a not-a-PTY-master error", err)
	}
}

func TestParseSyscall(t *testing.T) {
	nr, args, ok := parseSyscall("270 0x1 0x7ffd5c2e1f10 0x0 0x0 0x0 0x7ffd5c2e1e90 0x7ffd5c2e1e78 0x7f4b6d1f0a9d")
	if !ok || nr != 270 || args[0] != 1 || args[1] != 0x7ffd5c2e1f10 || args[5] != 0x7ffd5c2e1e90 {
		t.Errorf("parseSyscall = %d %x %v", nr, args, ok)
	}
	for _, line := range []string{"running", "-1 0x7ffd5c2e1e78 0x7f4b6d1f0a9d", ""} {
		if _, _, ok := parseSyscall(line); ok {
			t.Errorf("parseSyscall(%q) ok", line)
		}
	}
}

func TestTTYDevice(t *testing.T) {
	// /dev/pts/3 is 136:3, tty_nr 34819; /dev/pts/300 is 136:300.
	if got := ttyDevice(34819); got != unix.Mkdev(136, 3) {
		t.Errorf("ttyDevice(34819) = %d", got)
	}
	if got := ttyDevice(136<<8 | 300&0xff | (300&^0xff)<<12); got != unix.Mkdev(136, 300) {
		t.Errorf("ttyDevice(pts/300) = %d", got)
	}
}

// BenchmarkCheck is one Check of a shell at its prompt, with the default
// gap between the two looks; BenchmarkCheckNoGap is the /proc work alone.
func BenchmarkCheck(b *testing.B) {
	benchCheck(b, Options{})
}

func BenchmarkCheckNoGap(b *testing.B) {
	benchCheck(b, Options{Gap: time.Nanosecond})
}

func benchCheck(b *testing.B, o Options) {
	sh := startShell(b)
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := o.Check(sh.ptmx, sh.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		if r.Reason == StdinRead {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("bash never waited at its prompt: %s", r.Detail)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for b.Loop() {
		r, err := o.Check(sh.ptmx, sh.cmd.Process.Pid)
		if err != nil || r.Reason != StdinRead {
			b.Fatalf("Check = %v %q, %v", r.Reason, r.Detail, err)
		}
	}
	// The cost grows with the processes in /proc, which are all read.
	procs, _ := listProcs()
	b.ReportMetric(float64(len(procs)), "procs")
}
