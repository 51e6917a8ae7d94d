package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testplugins"
)

var termIDRE = regexp.MustCompile(`terminal (t\d+-[0-9a-f]+)`)

func terminalsComp(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(testplugins.Root(), "compositions", "terminals.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func openTerm(t *testing.T, ctx context.Context, cs *mcp.ClientSession) string {
	t.Helper()
	text, r := callText(t, ctx, cs, "terminal_open", map[string]any{})
	m := termIDRE.FindStringSubmatch(text)
	if r.IsError || m == nil {
		t.Fatalf("terminal_open: %s", text)
	}
	return m[1]
}

func sendTerm(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	text, _ := callText(t, ctx, cs, "terminal_send", args)
	return text
}

// expect fails unless text holds every one of want.
func expect(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("%s: no %q in\n%s", what, w, text)
		}
	}
}

// The terminal tools through dsh serve and real plugins: settles on
// evidence (a shell at its prompt, a read, a REPL, a pager), a timeout
// then an interrupt, refusals in plain words, the end of a session, and
// another client's terminals out of sight and reach.
func TestTerminalTools(t *testing.T) {
	if _, err := os.Stat("/proc/self/syscall"); err != nil {
		t.Skip("the wait reasons are read from /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startHTTP(t, terminalsComp(t))
	a := s.connect(t, ctx)
	id := openTerm(t, ctx, a)

	text := sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "echo h''i"})
	expect(t, "echo", text, "\nhi\n", "[wait: stdin_read — ")

	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": `read -p "name? " x`})
	expect(t, "read -p", text, "name? ", "[wait: stdin_read — ")
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "ada"})
	expect(t, "the answer", text, "[wait: stdin_read — ")

	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "sleep 5", "waitMs": 500})
	expect(t, "sleep 5", text, "[wait: timeout — ")
	text, _ = callText(t, ctx, a, "terminal_signal", map[string]any{"session_id": id, "signal": "SIGINT"})
	expect(t, "SIGINT", text, "[SIGINT sent to the program in front of "+id)
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "echo af''ter $x"})
	expect(t, "after the interrupt", text, "\nafter ada\n", "[wait: stdin_read — ")

	if _, err := exec.LookPath("python3"); err == nil {
		text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "python3 -q", "waitMs": 10000})
		expect(t, "python3", text, "\n>>>\n", "[wait: stdin_read — ")
		text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "print(6*7)"})
		expect(t, "python3 print", text, "\n42\n>>>\n", "[wait: stdin_read — ")
		text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "exit()"})
		expect(t, "python3 exit", text, "[wait: stdin_read — ")
	}

	page := filepath.Join(t.TempDir(), "pages.txt")
	var lines []string
	for i := 1; i <= 200; i++ {
		lines = append(lines, fmt.Sprintf("page line %d", i))
	}
	if err := os.WriteFile(page, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("less"); err == nil {
		text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "less " + page})
		expect(t, "less", text, "page line 1\n", "page line 39\n", "[a full-screen program is showing]", "[wait: stdin_read — ")
		text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "q", "submit": false})
		expect(t, "less q", text, "[wait: stdin_read — ")
		if strings.Contains(text, "[a full-screen program is showing]") {
			t.Fatalf("less is still showing:\n%s", text)
		}
	}

	// SIGKILL for the shell, by name or at its prompt, is refused for close.
	for _, args := range []map[string]any{{"target": "shell"}, {}} {
		args["session_id"], args["signal"] = id, "SIGKILL"
		text, r := callText(t, ctx, a, "terminal_signal", args)
		if !r.IsError || text != "[SIGKILL would end the shell of "+id+": close the terminal instead (terminal_close waits until everything in it has ended)]" {
			t.Fatalf("SIGKILL %v: %s", args, text)
		}
	}

	// Another client: none of the first one's terminals, and the same
	// words for its id (or its short id) as for one that never was.
	b := s.connect(t, ctx)
	if text, _ := callText(t, ctx, b, "terminal_list", map[string]any{}); text != "[no terminals open]" {
		t.Fatalf("the other client's list: %s", text)
	}
	for _, other := range []string{id, strings.Split(id, "-")[0], "t999-000000000000"} {
		for _, tool := range []string{"terminal_send", "terminal_read", "terminal_close"} {
			args := map[string]any{"session_id": other}
			if tool == "terminal_send" {
				args["text"] = "echo pwned"
			}
			text, r := callText(t, ctx, b, tool, args)
			if !r.IsError || text != "[no terminal "+other+" in this session: none is open (terminal_open opens one)]" {
				t.Fatalf("%s of %s by another client: %s", tool, other, text)
			}
		}
	}
	if text, _ := callText(t, ctx, a, "terminal_list", map[string]any{}); !strings.Contains(text, id) {
		t.Fatalf("the owner's list: %s", text)
	}

	// Close ends a child that left the shell's session.
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": `setsid sh -c 'echo child=$$; exec sleep 300' &`})
	childRE := regexp.MustCompile(`child=(\d+)`)
	m := childRE.FindStringSubmatch(text)
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); {
		more, _ := callText(t, ctx, a, "terminal_read", map[string]any{"session_id": id, "waitMs": 500})
		text += more
		m = childRE.FindStringSubmatch(text)
	}
	if m == nil {
		t.Fatalf("setsid sleep: %s", text)
	}
	child, _ := strconv.Atoi(m[1])
	if syscall.Kill(child, 0) != nil {
		t.Fatalf("the setsid child %d is not running", child)
	}
	text, _ = callText(t, ctx, a, "terminal_close", map[string]any{"session_id": id})
	expect(t, "close", text, "[terminal "+id+" closed")
	// Dead is gone: a zombie waits only for init, which it was handed to.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); err == nil && !strings.Contains(string(st), ") Z ") {
		t.Fatalf("the setsid child %d outlived the close: %s", child, st)
	}

	// exit ends the session.
	id2 := openTerm(t, ctx, a)
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id2, "text": "exit"})
	expect(t, "exit", text, "[session "+id2+" exited with code 0: close it with terminal_close]")
	callText(t, ctx, a, "terminal_close", map[string]any{"session_id": id2})
}

// 128 terminals per client; the 129th is refused in plain words, and a
// close makes room again.
func TestTerminalCap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startHTTP(t, terminalsComp(t))
	a := s.connect(t, ctx)
	var first string
	for i := range 128 {
		id := openTerm(t, ctx, a)
		if i == 0 {
			first = id
		}
	}
	text, r := callText(t, ctx, a, "terminal_open", map[string]any{})
	if !r.IsError || text != "[at most 128 terminals per session: close one first]" {
		t.Fatalf("the 129th terminal: %s", text)
	}
	callText(t, ctx, a, "terminal_close", map[string]any{"session_id": first})
	openTerm(t, ctx, a)
}

// An interrupt discards what was typed ahead, as Ctrl-C does in a
// terminal: a line sent while a command runs, and not read yet, never runs
// once terminal_signal SIGINT (or terminal_send's signal) interrupted it.
func TestTerminalInterruptDiscardsTypedAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startHTTP(t, terminalsComp(t))
	a := s.connect(t, ctx)
	id := openTerm(t, ctx, a)
	dir := t.TempDir()

	for _, how := range []string{"terminal_signal", "terminal_send"} {
		marker := filepath.Join(dir, how)
		text := sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "sleep 30", "waitMs": 300})
		expect(t, how+": sleep 30", text, "[wait: timeout — ")
		// The interrupt is for sleep: it is in front before the line is
		// typed ahead of it (a send of nothing waits and says who is).
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(text, " sleep: "); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: sleep never came to the front:\n%s", how, text)
			}
			text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "", "submit": false, "waitMs": 200})
		}
		text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "touch " + marker, "waitMs": 100})
		expect(t, how+": the line typed ahead", text, "[wait: timeout — ")
		after := "echo af''ter-" + how
		if how == "terminal_signal" {
			text, _ = callText(t, ctx, a, "terminal_signal", map[string]any{"session_id": id, "signal": "SIGINT"})
			expect(t, how+": SIGINT", text, "[SIGINT sent to the program in front of "+id)
			// The shell has its prompt back before the next line (a line
			// typed while the job dies may be lost to the line editor).
			text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "", "submit": false, "waitMs": 10000})
			expect(t, how+": the prompt after SIGINT", text, "[wait: stdin_read — ")
			text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": after})
		} else {
			text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "signal": "SIGINT", "text": after})
		}
		// The shell read its input in order: had the line typed ahead been
		// kept, it ran before this one.
		expect(t, how+": the line after the interrupt", text, "\nafter-"+how+"\n", "[wait: stdin_read — ")
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the line typed ahead ran after the interrupt:\n%s", how, text)
		}
	}
}

// A terminal is found by the name it was opened with or by its short id
// (t1) as well as by its id; a name or id that is none of the caller's
// says so in the same sentence for every tool, naming the caller's own
// terminals and no one else's; one that could be several says which.
func TestTerminalNamesAndShortIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startHTTP(t, terminalsComp(t))
	a := s.connect(t, ctx)
	text, r := callText(t, ctx, a, "terminal_open", map[string]any{"name": "build"})
	m := termIDRE.FindStringSubmatch(text)
	if r.IsError || m == nil {
		t.Fatalf("terminal_open build: %s", text)
	}
	build := m[1]
	other := openTerm(t, ctx, a)
	short := func(id string) string { return strings.Split(id, "-")[0] }

	text = sendTerm(t, ctx, a, map[string]any{"session_id": "build", "text": "echo by-''name"})
	expect(t, "a send by name", text, "\nby-name\n", "[wait: stdin_read — ")
	text, _ = callText(t, ctx, a, "terminal_read", map[string]any{"session_id": short(build)})
	expect(t, "a read by short id", text, "\nby-name\n")
	text, _ = callText(t, ctx, a, "terminal_read", map[string]any{"session_id": short(other)})
	if strings.Contains(text, "by-name") {
		t.Fatalf("the other terminal shows what was sent to %s:\n%s", build, text)
	}
	text, _ = callText(t, ctx, a, "terminal_signal", map[string]any{"session_id": "build", "signal": "SIGINT"})
	expect(t, "a signal by name", text, "[SIGINT sent to the program in front of "+build)

	// None of the caller's: one sentence for every tool, SIGKILL for a
	// shell included.
	want := "[no terminal nope in this session; the open ones: " + build + " (named build), " + other + "]"
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"terminal_send", map[string]any{"text": "echo hi"}},
		{"terminal_read", map[string]any{}},
		{"terminal_signal", map[string]any{"signal": "SIGINT"}},
		{"terminal_signal", map[string]any{"signal": "SIGKILL", "target": "shell"}},
		{"terminal_signal", map[string]any{"signal": "SIGKILL"}},
		{"terminal_close", map[string]any{}},
	} {
		for _, name := range []string{"nope", "t999-000000000000"} {
			c.args["session_id"] = name
			text, r := callText(t, ctx, a, c.tool, c.args)
			if w := strings.Replace(want, "nope", name, 1); !r.IsError || text != w {
				t.Fatalf("%s %v:\n got %s\nwant %s", c.tool, c.args, text, w)
			}
		}
	}

	// A name that is another's short id could be either.
	text, r = callText(t, ctx, a, "terminal_open", map[string]any{"name": short(other)})
	m = termIDRE.FindStringSubmatch(text)
	if r.IsError || m == nil {
		t.Fatalf("terminal_open %s: %s", short(other), text)
	}
	text, r = callText(t, ctx, a, "terminal_read", map[string]any{"session_id": short(other)})
	if w := "[" + short(other) + " could be any of " + other + ", " + m[1] + " (named " + short(other) + "): give the id]"; !r.IsError || text != w {
		t.Fatalf("an ambiguous name:\n got %s\nwant %s", text, w)
	}

	// Another client finds none of these by name either.
	b := s.connect(t, ctx)
	text, r = callText(t, ctx, b, "terminal_send", map[string]any{"session_id": "build", "text": "echo pwned"})
	if !r.IsError || text != "[no terminal build in this session: none is open (terminal_open opens one)]" {
		t.Fatalf("another client's send to build: %s", text)
	}

	text, _ = callText(t, ctx, a, "terminal_close", map[string]any{"session_id": "build"})
	expect(t, "a close by name", text, "[terminal "+build+" closed")
}
