package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/testplugins"
)

// termFacts is what the benchmark reads of tool-terminal's structured
// content.
type termFacts struct {
	Session *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"session"`
	Wait   string `json:"wait"`
	Screen *struct {
		Viewport string `json:"viewport"`
	} `json:"screen"`
}

// atPrompt: the viewport's last line is the shell's prompt (the tool's
// facts carry the screen, not the registry's at_prompt; the screen trims
// the trailing space).
func (f termFacts) atPrompt() bool {
	if f.Screen == nil {
		return false
	}
	v := strings.TrimRight(f.Screen.Viewport, " \n")
	return v == "$" || strings.HasSuffix(v, "\n$")
}

func termCall(cs *mcp.ClientSession, tool string, args map[string]any) (termFacts, error) {
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return termFacts{}, err
	}
	if r.IsError {
		return termFacts{}, fmt.Errorf("%s: %s", tool, text(r))
	}
	b, err := json.Marshal(r.StructuredContent)
	check(err)
	var f termFacts
	check(json.Unmarshal(b, &f))
	return f, nil
}

func mustTerm(cs *mcp.ClientSession, tool string, args map[string]any) termFacts {
	f, err := termCall(cs, tool, args)
	check(err)
	return f
}

// openToPrompt opens a terminal and reads it until its prompt shows.
func openToPrompt(cs *mcp.ClientSession) (string, error) {
	f, err := termCall(cs, "terminal_open", map[string]any{})
	if err != nil {
		return "", err
	}
	id := f.Session.ID
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		f, err := termCall(cs, "terminal_read", map[string]any{"session_id": id, "waitMs": 1000})
		if err != nil {
			return id, err
		}
		if f.atPrompt() {
			return id, nil
		}
	}
	return id, fmt.Errorf("terminal %s: no prompt in 20s", id)
}

// directBash is the baseline: the shell terminal-bash starts (same argv,
// the same PS1 and PROMPT_COMMAND shape), on a pty of our own.
type directBash struct {
	cmd    *exec.Cmd
	master *os.File
	prompt []byte
}

func startDirect(nonce string) *directBash {
	ps1 := `\[\e]133;A;dsh=` + nonce + `\a\]$ `
	cmd := exec.Command("bash", "--norc", "--noprofile", "-i")
	cmd.Env = append(os.Environ(), "PS1="+ps1, "PROMPT_COMMAND=PS1='"+ps1+"'; export -n PS1 PROMPT_COMMAND", "TERM=xterm-256color", "HISTFILE=")
	m, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	check(err)
	return &directBash{cmd: cmd, master: m, prompt: []byte("\x1b]133;A;dsh=" + nonce + "\a$ ")}
}

// until reads the master until the next prompt and returns what it read.
func (d *directBash) until() []byte {
	_ = d.master.SetReadDeadline(time.Now().Add(20 * time.Second))
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, d.prompt) {
		n, err := d.master.Read(buf)
		check(err)
		got = append(got, buf[:n]...)
	}
	return got
}

func (d *directBash) kill() {
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	_ = d.master.Close()
}

// terminalsBench: compositions/terminals.yaml through dsh serve over MCP
// (shell-env, terminal-bash, tool-terminal) against the same bash on a pty
// of the benchmark's own: open to first prompt, a settled send of `echo
// hi`, and the host's RSS with 100 terminals open.
func terminalsBench(dir string, n int) {
	comp := filepath.Join(testplugins.Root(), "compositions", "terminals.yaml")
	serve := func() (*mcp.ClientSession, int) {
		cmd := exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comp)
		return connect(cmd), cmd.Process.Pid
	}
	cs, _ := serve()
	// Warm up: the plugins' first calls and the page cache of bash.
	for i := 0; i < 3; i++ {
		id, err := openToPrompt(cs)
		check(err)
		mustTerm(cs, "terminal_close", map[string]any{"session_id": id})
	}

	var open, openDirect []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		d := startDirect(fmt.Sprintf("%016x", i))
		d.until()
		openDirect = append(openDirect, time.Since(t))
		d.kill()

		t = time.Now()
		id, err := openToPrompt(cs)
		check(err)
		open = append(open, time.Since(t))
		mustTerm(cs, "terminal_close", map[string]any{"session_id": id})
	}
	fmt.Println("terminal_open to first prompt (MCP open, then terminal_read until the viewport shows `$`)")
	row("dsh terminal_open+read", open)
	row("direct pty bash -i", openDirect)
	fmt.Printf("  ratio (median): %.2fx\n\n", float64(median(open))/float64(median(openDirect)))

	id, err := openToPrompt(cs)
	check(err)
	d := startDirect("ffffffffffffffff")
	d.until()
	send := func() termFacts {
		return mustTerm(cs, "terminal_send", map[string]any{"session_id": id, "text": "echo hi", "waitMs": 5000})
	}
	direct := func() {
		_, err := d.master.Write([]byte("echo hi\r"))
		check(err)
		if got := d.until(); bytes.Count(got, []byte("hi")) < 2 {
			fail(fmt.Sprintf("direct echo hi: %q", got))
		}
	}
	for i := 0; i < 3; i++ {
		send()
		direct()
	}
	var sent, sentDirect []time.Duration
	reasons := map[string]int{}
	for i := 0; i < n; i++ {
		t := time.Now()
		direct()
		sentDirect = append(sentDirect, time.Since(t))

		t = time.Now()
		f := send()
		sent = append(sent, time.Since(t))
		reasons[f.Wait]++
		if f.Screen == nil || !strings.Contains(f.Screen.Viewport, "\nhi\n") {
			fail("terminal_send echo hi: no hi on the screen")
		}
	}
	d.kill()
	mustTerm(cs, "terminal_close", map[string]any{"session_id": id})
	fmt.Println("terminal_send `echo hi` with submit, to settle")
	row("dsh terminal_send", sent)
	row("direct pty write+read", sentDirect)
	fmt.Printf("  ratio (median): %.2fx\n", float64(median(sent))/float64(median(sentDirect)))
	fmt.Printf("  wait reasons: %s\n", counts(reasons))
	// The registry looks at /proc once output has been quiet 20 ms (each look takes two samples some 5 ms apart).
	fmt.Println("  floor of the design: 20ms of quiet output, then a look of two samples about 5ms apart")
	fmt.Println()
	_ = cs.Close()

	hundredTerminals(serve)
}

// hundredTerminals opens 100 terminals in one fresh session and prints the
// host's RSS against its RSS before, then checks each one answers a send.
func hundredTerminals(serve func() (*mcp.ClientSession, int)) {
	const k = 100
	cs, pid := serve()
	defer cs.Close()
	mustTerm(cs, "terminal_list", map[string]any{})
	before := procKiB(pid, "VmRSS")
	t := time.Now()
	ids := make([]string, k)
	for i := range ids {
		id, err := openToPrompt(cs)
		check(err)
		ids[i] = id
	}
	took := time.Since(t)
	rss, hwm := procKiB(pid, "VmRSS"), procKiB(pid, "VmHWM")

	// The sends in parallel: each settles on its own terminal.
	var mu sync.Mutex
	var lat []time.Duration
	reasons := map[string]int{}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			f, err := termCall(cs, "terminal_send", map[string]any{"session_id": id, "text": "echo ok", "waitMs": 10000})
			mu.Lock()
			defer mu.Unlock()
			if err != nil || f.Screen == nil || !strings.Contains(f.Screen.Viewport, "\nok\n") {
				reasons["no answer"]++
				return
			}
			lat = append(lat, time.Since(t))
			reasons[f.Wait]++
		}()
	}
	wg.Wait()
	for _, id := range ids {
		mustTerm(cs, "terminal_close", map[string]any{"session_id": id})
	}
	fmt.Printf("host RSS with %d terminals open in one MCP session (each at its prompt; opened one after another in %s)\n", k, fmtDur(took))
	fmt.Printf("  VmRSS %.1f MiB (before: %.1f MiB), VmHWM %.1f MiB: %.1f KiB per terminal\n",
		float64(rss)/1024, float64(before)/1024, float64(hwm)/1024, float64(rss-before)/k)
	fmt.Printf("  answered `echo ok` (all %d sent at once): %d of %d; wait reasons: %s\n", k, len(lat), k, counts(reasons))
	row("terminal_send, 100 at once", lat)
	fmt.Println()
}

func counts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []string
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(none)"
		}
		b = append(b, fmt.Sprintf("%s %d", name, m[k]))
	}
	return strings.Join(b, ", ")
}

// persistentCalls is the persistent bash tool's call latency against
// tool-bash's in one server: `true` in the agent's persistent shell (a
// typed line, a run to its end marker) and as a fresh one-shot bash,
// interleaved.
func persistentCalls(dir string, n int) {
	comp := filepath.Join(dir, "persistent.yaml")
	check(os.WriteFile(comp, []byte(fmt.Sprintf(`plugins:
  - id: env
    path: %[1]s/dsh-shell-env
  - id: bash
    path: %[1]s/dsh-bash-local
  - id: tools
    path: %[1]s/dsh-tool-bash
  - id: term-bash
    path: %[1]s/dsh-terminal-bash
  - id: persistent
    path: %[1]s/dsh-tool-bash-persistent
    config:
      toolName: pbash
`, dir)), 0o600))
	cs := connect(exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comp))
	defer cs.Close()
	call := func(tool, command string) (string, time.Duration) {
		t := time.Now()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"command": command, "description": "bench"}})
		d := time.Since(t)
		check(err)
		if r.IsError {
			fail(fmt.Sprintf("%s %q: %s", tool, command, text(r)))
		}
		return text(r), d
	}
	for i := 0; i < 5; i++ {
		call("bash", "true")
		call("pbash", "true")
	}
	var oneShot, persistent []time.Duration
	for i := 0; i < n; i++ {
		_, d := call("bash", "true")
		oneShot = append(oneShot, d)
		_, d = call("pbash", "true")
		persistent = append(persistent, d)
	}
	if out, _ := call("pbash", "echo $((6*7))"); out != "42" {
		fail(fmt.Sprintf("pbash echo: %q", out))
	}
	fmt.Println("persistent bash tool `true` against tool-bash `true` (bash-local), over MCP in one server")
	row("tool-bash-persistent", persistent)
	row("tool-bash", oneShot)
	fmt.Printf("  ratio (median): %.2fx\n\n", float64(median(persistent))/float64(median(oneShot)))

	// Output: 1.9 MB through the terminal (a pty, the registry's capture,
	// the screen that watches it) against the same through pipes; each
	// result is the last lines within the budget.
	const seq = "seq 1 300000"
	var outOneShot, outPersistent []time.Duration
	for i := 0; i < max(n/10, 5); i++ {
		out, d := call("bash", seq)
		outOneShot = append(outOneShot, d)
		if !strings.Contains(out, "\n300000") {
			fail(fmt.Sprintf("bash %s: no 300000 in %q", seq, out[max(len(out)-200, 0):]))
		}
		out, d = call("pbash", seq)
		outPersistent = append(outPersistent, d)
		if !strings.Contains(out, "\n300000") {
			fail(fmt.Sprintf("pbash %s: no 300000 in %q", seq, out[max(len(out)-200, 0):]))
		}
	}
	fmt.Println("persistent bash tool `seq 1 300000` (1.9 MB) against tool-bash's, over MCP in one server")
	row("tool-bash-persistent", outPersistent)
	row("tool-bash", outOneShot)
	fmt.Printf("  ratio (median): %.2fx\n\n", float64(median(outPersistent))/float64(median(outOneShot)))
}
