package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A request that reuses the id of one still in flight is answered with a
// JSON-RPC error (the go-sdk alone would drop it without a word, leaving
// its caller waiting), and the first request's answer still comes.
func TestMCPDuplicateInFlightID(t *testing.T) {
	f := fault(t, "stdio: a request reusing the id of one in flight")
	s := startRaw(t, toolsComp)
	flag := filepath.Join(t.TempDir(), "go")
	// The first call waits (at most 60 s) until the test lets it end.
	first := `for i in $(seq 1200); do [ -e ` + flag + ` ] && break; sleep 0.05; done; echo first-done`
	call := func(cmd string) string {
		p, _ := json.Marshal(map[string]any{"name": "bash", "arguments": map[string]any{"command": cmd, "description": "dup"}})
		return `{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":` + string(p) + `}`
	}
	s.send(call(first))
	s.send(call("echo second"))
	m := s.next()
	if string(m.ID) != `"dup"` || m.Error == nil || m.Result != nil {
		t.Fatalf("the duplicate got %s, want a JSON-RPC error with its id", m.raw)
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(m.Error, &e) != nil || e.Code != -32600 || !strings.Contains(e.Message, "in flight") {
		t.Fatalf("the duplicate's error: %s", m.Error)
	}
	f.Saw("the duplicate answered: %s", e.Message)
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m = s.next()
	var r toolResult
	if string(m.ID) != `"dup"` || m.Error != nil || json.Unmarshal(m.Result, &r) != nil || r.IsError || !strings.Contains(r.text(), "first-done") || strings.Contains(r.text(), "second") {
		t.Fatalf("the first call's answer: %s", m.raw)
	}
	f.Saw("the first call's answer came")
	s.echo("after")
}

// longCommand is a command of about size bytes (a variable assignment
// makes it long) that shows how it ran: its length, $0, an error's
// wording, and `set -e` stopping it.
func longCommand(size int) (cmd, want string) {
	pad := strings.Repeat("a", size)
	cmd = "x='" + pad + "'\n" + `echo "len=${#x} 0=$0"
no_such_command_zz
set -e
false
echo not-reached`
	return cmd, fmt.Sprintf("len=%d 0=bash", size)
}

// Commands longer than one argument may be (Linux: 128 KiB), and longer
// than gRPC's default message (4 MiB), run through the real binaries as a
// short one does; one longer than an MCP message may be is refused in one
// sentence naming the limit, and the session goes on.
func TestMCPLongCommands(t *testing.T) {
	f := fault(t, "stdio: commands of 200 KiB, 8 MiB and over the 16 MiB limit")
	s := startRaw(t, toolsComp)
	for _, size := range []int{200 << 10, 8 << 20} {
		cmd, want := longCommand(size)
		text := s.tool("bash", map[string]any{"command": cmd}).text()
		if !strings.Contains(text, want) || !strings.Contains(text, "bash: line 3: no_such_command_zz: command not found") || strings.Contains(text, "not-reached") {
			t.Fatalf("a command of %d bytes: %.2000q, want %q", len(cmd), text, want)
		}
		f.Saw("%d bytes ran", len(cmd))
	}
	// Over the limit: the transport refuses the message itself.
	p, _ := json.Marshal(map[string]any{"name": "bash", "arguments": map[string]any{"command": strings.Repeat("a", 16<<20), "description": "too long"}})
	s.send(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":` + string(p) + `}`)
	m := s.next()
	if string(m.ID) != `"big"` || m.Error == nil || !strings.Contains(string(m.Error), "larger than 16777216 bytes") {
		t.Fatalf("a command over the limit: %.2000s", m.raw)
	}
	f.Saw("over the limit: %s", m.Error)
	s.echo("after")
}

// After a SIGKILL of the host, the next host removes what the first left:
// its runtime directory, its plugins' sockets with it, and the sockets
// go-plugin made for the host itself in TMPDIR (private to this test, so
// it counts only its own).
func TestKilledHostsSocketsAreSwept(t *testing.T) {
	f := fault(t, "kill -9 of the host, then another host starts")
	rt := t.TempDir()
	tmp := t.TempDir()
	comp := writeComp(t, toolsComp)
	hostSockets := func() []string {
		var socks []string
		names, _ := filepath.Glob(filepath.Join(tmp, "plugin*"))
		for _, n := range names {
			if fi, err := os.Lstat(n); err == nil && fi.Mode()&os.ModeSocket != 0 {
				socks = append(socks, n)
			}
		}
		return socks
	}
	serve := func() *exec.Cmd {
		cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", comp)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt, "TMPDIR="+tmp)
		stderr := &syncbuf.Buffer{}
		cmd.Stderr = stderr
		if _, err := cmd.StdinPipe(); err != nil { // held open: the host serves until killed
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if !waitFor(60*time.Second, func() bool { return strings.Contains(stderr.String(), "ready in") }) {
			t.Fatalf("dsh serve not ready in 60s:\n%s", stderr)
		}
		return cmd
	}
	first := serve()
	dir := filepath.Join(rt, "dsh", fmt.Sprintf("host-%d", first.Process.Pid))
	socks, _ := filepath.Glob(filepath.Join(dir, "sockets", "plugin*"))
	if len(socks) < 3 {
		t.Fatalf("sockets in the host's directory: %v, want the three plugins'", socks)
	}
	own := hostSockets()
	if len(own) < 3 {
		t.Fatalf("the host's own sockets in TMPDIR: %v, want one per plugin", own)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	f.Saw("host killed with %d sockets in %s and %d in TMPDIR", len(socks), filepath.Base(dir), len(own))
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed host's directory went before another host started: %v", err)
	}
	for _, s := range own {
		if _, err := os.Lstat(s); err != nil {
			t.Fatalf("the killed host's socket %s went before another host started: %v", s, err)
		}
	}
	serve()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the killed host's directory is still there once another started: %v", err)
	}
	for _, s := range own {
		if _, err := os.Lstat(s); !os.IsNotExist(err) {
			t.Fatalf("the killed host's socket %s is still in TMPDIR once another host started: %v", s, err)
		}
	}
	// The running host's own sockets are live: they are kept.
	if now := hostSockets(); len(now) < 3 {
		t.Fatalf("the running host's sockets in TMPDIR: %v, want one per plugin", now)
	}
	f.Saw("the next host removed them and kept its own")
}

// Over HTTP a request may be as large as on stdio (the go-sdk alone takes
// 4 MiB): an 8 MiB command runs through the real host; a larger request
// than 16 MiB is refused with a JSON-RPC error carrying its id, and the
// session goes on.
func TestMCPHTTPLongCommand(t *testing.T) {
	f := fault(t, "http: a command of 8 MiB, then a request over 16 MiB")
	s := startHTTP(t, toolsComp)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cs := s.connect(t, ctx)
	cmd, want := longCommand(8 << 20)
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": cmd, "description": "long"}})
	if err != nil {
		t.Fatalf("a command of %d bytes: %.2000v", len(cmd), err)
	}
	var text string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !strings.Contains(text, want) || !strings.Contains(text, "bash: line 3: no_such_command_zz: command not found") || strings.Contains(text, "not-reached") {
		t.Fatalf("a command of %d bytes: %.2000q, want %q", len(cmd), text, want)
	}
	f.Saw("%d bytes ran", len(cmd))

	sid := s.rawSession(t)
	p, _ := json.Marshal(map[string]any{"name": "bash", "arguments": map[string]any{"command": strings.Repeat("a", 16<<20), "description": "too long"}})
	code, body := s.post(t, s.token, sid, `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":`+string(p)+`}`)
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if code != http.StatusRequestEntityTooLarge || json.Unmarshal([]byte(body), &m) != nil || string(m.ID) != `"big"` || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "larger than 16777216 bytes") {
		t.Fatalf("a request over the limit: %d %.2000s", code, body)
	}
	f.Saw("over the limit: %d %s", code, body)
	if code, body := s.post(t, s.token, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); code != http.StatusOK || !strings.Contains(body, `"id":2`) {
		t.Fatalf("ping after the refused request: %d %s", code, body)
	}
}
