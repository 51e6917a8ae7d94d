package screen

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/internal/testneeds"
)

// term is a program on a real PTY whose output feeds a Screen, as the
// terminal registry runs one.
type term struct {
	t    *testing.T
	s    *Screen
	ptmx *os.File
	cmd  *exec.Cmd
	dir  string
	fed  chan struct{}
}

// startShell starts bash without startup files on a cols × rows PTY.
func startShell(t *testing.T, cols, rows int) *term {
	return startProgram(t, cols, rows, true, "bash", "--norc", "--noprofile")
}

func startProgram(t *testing.T, cols, rows int, replies bool, argv ...string) *term {
	t.Helper()
	testneeds.Command(t, argv[0])
	dir := t.TempDir()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		// The prompt sets the title to the command number, a count the
		// tests wait on without it showing on the screen.
		`PS1=\[\e]0;#\#\a\]$ `,
		"HISTFILE=/dev/null",
		"LESSHISTFILE=-",
		"PYTHONSTARTUP=",
		"NODE_REPL_HISTORY=",
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		t.Fatalf("start %v on a PTY: %v", argv, err)
	}
	var reply io.Writer
	if replies {
		reply = ptmx
	}
	tm := &term{t: t, s: New(cols, rows, reply), ptmx: ptmx, cmd: cmd, dir: dir, fed: make(chan struct{})}
	go func() {
		defer close(tm.fed)
		_, _ = io.Copy(tm.s, ptmx) // ends with EIO once the program is gone
	}()
	t.Cleanup(tm.stop)
	return tm
}

func (tm *term) stop() {
	// pty.Start made the program a session leader: its group is its pid.
	_ = syscall.Kill(-tm.cmd.Process.Pid, syscall.SIGKILL)
	_ = tm.cmd.Wait()
	_ = tm.ptmx.Close()
	select {
	case <-tm.fed:
	case <-time.After(30 * time.Second):
		tm.t.Error("the PTY's output did not end within 30s of the program's end")
	}
	_ = tm.s.Close()
}

// send types text, "\r" being Enter.
func (tm *term) send(text string) {
	tm.t.Helper()
	if _, err := tm.ptmx.WriteString(text); err != nil {
		tm.t.Fatalf("write to the PTY: %v", err)
	}
}

// snapshot returns the viewport and the title at one instant.
func (tm *term) snapshot() (vp, title string) {
	tm.s.mu.Lock()
	defer tm.s.mu.Unlock()
	return joinRows(tm.s.rows()), tm.s.title
}

// waitFor polls the viewport until ok holds, and returns it.
func (tm *term) waitFor(what string, ok func(vp string) bool) string {
	tm.t.Helper()
	return tm.waitForTitled(what, func(vp, _ string) bool { return ok(vp) })
}

func (tm *term) waitForTitled(what string, ok func(vp, title string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		vp, title := tm.snapshot()
		if ok(vp, title) {
			return vp
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("timed out waiting for %s; viewport:\n%s", what, vp)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// prompt waits for the shell's prompt for command number n.
func (tm *term) prompt(n int) string {
	tm.t.Helper()
	title := fmt.Sprintf("#%d", n)
	return tm.waitForTitled("prompt "+title, func(vp, t string) bool {
		return t == title && (vp == "$" || strings.HasSuffix(vp, "\n$"))
	})
}

// run types a command at the prompt and waits for the next one.
func (tm *term) run(cmd string) string {
	tm.t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(tm.s.Title(), "#"))
	if err != nil {
		tm.t.Fatalf("not at a prompt: title %q", tm.s.Title())
	}
	tm.send(cmd + "\r")
	return tm.prompt(n + 1)
}

func TestShellEcho(t *testing.T) {
	tm := startShell(t, 80, 24)
	tm.prompt(1)
	vp := tm.run("echo hello world")
	golden.Check(t, "echo", vp)
	if row, col, _ := tm.s.Cursor(); row != 2 || col != 2 {
		t.Errorf("Cursor = %d,%d, want 2,2 (after the prompt)", row, col)
	}
}

func TestShellColoursAndWideCharacters(t *testing.T) {
	tm := startShell(t, 120, 24)
	tm.prompt(1)
	vp := tm.run(`printf '\e[1;31mred\e[0m \e[42mgreen\e[0m plain\n'; echo $'h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c ok'`)
	golden.Check(t, "colours-utf8", vp)
	if strings.Contains(vp, "\x1b") {
		t.Error("escape codes in the viewport")
	}
}

func TestShellLongOutputScrolls(t *testing.T) {
	tm := startShell(t, 80, 24)
	tm.prompt(1)
	tm.s.Read(1 << 20) // the model looks at the fresh prompt
	tm.run("seq 1 500")

	r := tm.s.Read(1 << 20)
	unread := strings.Split(strings.TrimSuffix(r.Unread.Text, "\n"), "\n")
	view := strings.Split(r.Viewport, "\n")
	// 24 rows: 22 numbers and the prompt stay on the screen... but which
	// ones depends only on the row count: the rest scrolled off, once.
	all := append(unread, view...)
	if all[0] != "$ seq 1 500" || all[len(all)-1] != "$" {
		t.Fatalf("unread + viewport does not run from the command to the prompt: %q … %q", all[0], all[len(all)-1])
	}
	for i, l := range all[1 : len(all)-1] {
		if l != strconv.Itoa(i+1) {
			t.Fatalf("line %d = %q, want %d: every number once, in order", i+1, l, i+1)
		}
	}
	if len(view) != 24 || r.Unread.OmittedLines != 0 || r.Unread.Lines != 500+2-24 {
		t.Errorf("viewport %d rows, unread %d lines (%d omitted)", len(view), r.Unread.Lines, r.Unread.OmittedLines)
	}
	if again := tm.s.Read(1 << 20); again.Unread.Text != "" {
		t.Errorf("second read handed out %d lines again", again.Unread.Lines)
	}

	// Over the budget: the newest unread lines, and exact counts of the rest.
	tm.run("seq 1001 1500")
	vp := tm.s.Viewport()
	budget := len(vp) + 100
	r = tm.s.Read(budget)
	if r.Viewport != vp {
		t.Fatalf("viewport changed")
	}
	// Unread: the old prompt row ("$", seen, so not handed out), the
	// command line, 1001 … 1477; the rows seen at the last read, which
	// scroll off first, are not among them.
	totalLines := 1 + (1477 - 1001 + 1)
	totalChars := len("$ seq 1001 1500\n") + (1477-1001+1)*5
	checkExact(t, r.Unread, totalLines, totalChars)
	if !strings.HasSuffix(r.Unread.Text, "\n1477\n") || r.Unread.Lines != 100/5 {
		t.Errorf("unread text = %q", r.Unread.Text)
	}
}

func TestShellClear(t *testing.T) {
	tm := startShell(t, 80, 24)
	tm.prompt(1)
	tm.run("seq 1 3")
	tm.s.Read(1 << 20)
	if vp := tm.run("clear"); vp != "$" {
		t.Errorf("viewport after clear = %q", vp)
	}
	r := tm.s.Read(1 << 20)
	if r.Unread.Text != "$ clear\n" {
		t.Errorf("unread after clear = %q, want only the line typed since the last read", r.Unread.Text)
	}
	// Output not read before a clear is still handed out.
	tm.run("echo unseen; clear")
	if r := tm.s.Read(1 << 20); r.Unread.Text != "$ echo unseen; clear\nunseen\n" {
		t.Errorf("unread after clear = %q", r.Unread.Text)
	}
}

// writeNumbered writes "line 1" … "line n" to name in dir.
func writeNumbered(t *testing.T, dir, name string, n int) {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLess(t *testing.T) {
	testneeds.Command(t, "less")
	tm := startShell(t, 80, 24)
	writeNumbered(t, tm.dir, "file.txt", 100)
	tm.prompt(1)
	tm.send("less file.txt\r")
	vp := tm.waitFor("less's first page", func(vp string) bool {
		return strings.HasPrefix(vp, "line 1\n") && strings.Contains(vp, "line 23\n")
	})
	if !tm.s.AltScreen() {
		t.Error("less is not on the alternate screen")
	}
	golden.Check(t, "less", vp)

	tm.send("q")
	vp = tm.prompt(2)
	if tm.s.AltScreen() || strings.Contains(vp, "line 1") {
		t.Errorf("after q: AltScreen %v, viewport %q", tm.s.AltScreen(), vp)
	}
	// Paging on the alternate screen left nothing unread.
	if u := tm.s.Unread(1 << 20); strings.Contains(u.Text, "line") {
		t.Errorf("less's pages came back as unread: %q", u.Text)
	}
}

func TestVim(t *testing.T) {
	vim := ""
	for _, name := range []string{"vim", "vi"} {
		if _, err := exec.LookPath(name); err == nil {
			vim = name
			break
		}
	}
	if vim == "" {
		t.Skipf("neither vim nor vi is installed (%s)", testneeds.Install("vim"))
	}
	tm := startShell(t, 80, 24)
	writeNumbered(t, tm.dir, "file.txt", 5)
	tm.prompt(1)
	tm.send(vim + " -u NONE -i NONE -N file.txt\r")
	vp := tm.waitFor("vim's buffer", func(vp string) bool {
		return strings.HasPrefix(vp, "line 1\nline 2\nline 3\nline 4\nline 5\n~") && strings.Contains(vp, `"file.txt"`)
	})
	if !tm.s.AltScreen() {
		t.Error("vim is not on the alternate screen")
	}
	if row, col, _ := tm.s.Cursor(); row != 0 || col != 0 {
		t.Errorf("Cursor = %d,%d, want the buffer's start", row, col)
	}
	_ = vp
	tm.send(":q!\r")
	tm.prompt(2)
	if tm.s.AltScreen() {
		t.Error("still on the alternate screen after :q!")
	}
}

func TestTop(t *testing.T) {
	tm := startShell(t, 100, 30)
	tm.prompt(1)
	tm.send("top -d 1\r")
	tm.waitFor("top's header", func(vp string) bool {
		return strings.HasPrefix(vp, "top - ") && strings.Contains(vp, "PID") && strings.Contains(vp, "Tasks:")
	})
	tm.send("q")
	tm.prompt(2)
}

// A program that asks where the cursor is reads the answer from its
// terminal: the Screen's reply reaches it, and nothing hangs.
func TestCursorPositionQuery(t *testing.T) {
	tm := startShell(t, 80, 24)
	tm.prompt(1)
	// Echo goes off before the query, as a program that asks does: an
	// answer that came back first would be echoed.
	vp := tm.run(`stty -echo; printf '\e[6n'; read -rdR x; stty echo; echo "got ${x#*[}"`)
	if !strings.Contains(vp, "\ngot 2;1\n") {
		t.Errorf("no cursor position report reached the program:\n%s", vp)
	}
}

// Without replies a program waiting for one does not get it: the reply
// path is what TestCursorPositionQuery sees working.
func TestCursorPositionQueryUnanswered(t *testing.T) {
	tm := startProgram(t, 80, 24, false, "bash", "--norc", "--noprofile")
	tm.prompt(1)
	vp := tm.run(`stty -echo; printf '\e[6n'; read -t 0.5 -rdR x && echo got || echo none; stty echo`)
	if !strings.Contains(vp, "\nnone\n") {
		t.Errorf("want no answer without a reply writer:\n%s", vp)
	}
}

func TestPythonREPL(t *testing.T) {
	tm := startShell(t, 80, 24)
	tm.prompt(1)
	testneeds.Command(t, "python3")
	tm.send("python3 -q\r")
	tm.waitFor("the >>> prompt", func(vp string) bool { return strings.HasSuffix(vp, "\n>>>") })
	tm.send("print(6 * 7)\r")
	tm.waitFor("the answer", func(vp string) bool { return strings.HasSuffix(vp, ">>> print(6 * 7)\n42\n>>>") })
	tm.send("exit()\r")
	tm.prompt(2)
}

func TestResizeRealShell(t *testing.T) {
	tm := startShell(t, 80, 24)
	tm.prompt(1)
	tm.run("seq 1 30")
	tm.s.Resize(40, 10)
	if err := pty.Setsize(tm.ptmx, &pty.Winsize{Cols: 40, Rows: 10}); err != nil {
		t.Fatal(err)
	}
	vp := tm.run("tput cols; tput lines")
	if !strings.HasSuffix(vp, "\n40\n10\n$") {
		t.Errorf("after resize:\n%s", vp)
	}
	if n := strings.Count(vp, "\n") + 1; n > 10 {
		t.Errorf("viewport has %d rows on a 10-row screen", n)
	}
}

func TestProgramExit(t *testing.T) {
	tm := startShell(t, 80, 24)
	tm.prompt(1)
	tm.send("exit 3\r")
	select {
	case <-tm.fed:
	case <-time.After(10 * time.Second):
		t.Fatal("the PTY did not end with the shell")
	}
	err := tm.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("exit = %v", err)
	}
	if !strings.Contains(tm.s.Viewport(), "$ exit 3") {
		t.Errorf("viewport = %q", tm.s.Viewport())
	}
}
