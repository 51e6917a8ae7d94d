package reliability

import (
	"bufio"
	"encoding/json"
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

	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
)

// rawServe is one `dsh serve` over stdio driven with raw JSON-RPC lines:
// what a client library would never send, and what it would never show.
type rawServe struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr io.ReadCloser
	lines  chan []byte     // every line dsh wrote on stdout
	errLog *syncbuf.Buffer // what dsh wrote on stderr
	rtBase string
	exited chan struct{}
	seq    int
}

// startRaw starts `dsh serve [args...] COMPOSITION` and completes the
// MCP handshake.
func startRaw(t *testing.T, compYAML string, args ...string) *rawServe {
	t.Helper()
	return startRawEnv(t, nil, compYAML, args...)
}

// startRawEnv is startRaw with extra variables in dsh's environment.
func startRawEnv(t *testing.T, env []string, compYAML string, args ...string) *rawServe {
	t.Helper()
	s := &rawServe{t: t, rtBase: t.TempDir(), lines: make(chan []byte, 256), errLog: &syncbuf.Buffer{}, exited: make(chan struct{})}
	argv := append([]string{"serve"}, args...)
	argv = append(argv, writeComp(t, compYAML))
	s.cmd = exec.Command(filepath.Join(binDir, "dsh"), argv...)
	s.cmd.Env = append(append(os.Environ(), env...), "XDG_RUNTIME_DIR="+s.rtBase)
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if s.stdout, err = s.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if s.stderr, err = s.cmd.StderrPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.Copy(s.errLog, s.stderr)
	}()
	go func() {
		br := bufio.NewReaderSize(s.stdout, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				s.lines <- line
			}
			if err != nil {
				close(s.lines)
				return
			}
		}
	}()
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(60 * time.Second):
			_ = s.cmd.Process.Kill()
			t.Error("dsh serve did not end at end of input")
			select {
			case <-s.exited:
			case <-time.After(30 * time.Second):
				t.Error("dsh serve (or what holds its output) lived on 30s after SIGKILL")
			}
		}
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", s.errLog)
		}
	})
	r := s.request("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	if r.Error != nil {
		t.Fatalf("initialize: %s", r.Error)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// message is one line from dsh, as sent.
type message struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
	raw     []byte
}

func (s *rawServe) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		s.t.Fatalf("write to dsh: %v\nstderr:\n%s", err, s.errLog)
	}
}

// next returns the next message that is not dsh's own notification or
// request (those come whenever they like: tools/list_changed, progress).
func (s *rawServe) next() message {
	s.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("dsh closed its stdout\nstderr:\n%s", s.errLog)
			}
			var m message
			if strings.HasPrefix(strings.TrimSpace(string(line)), "[") {
				return message{raw: line}
			}
			if err := json.Unmarshal(line, &m); err != nil {
				s.t.Fatalf("dsh wrote a line that is not JSON: %q", line)
			}
			m.raw = line
			if m.Method != "" {
				continue
			}
			return m
		case <-deadline:
			s.t.Fatalf("no answer from dsh in 60s\nstderr:\n%s", s.errLog)
		}
	}
}

// request sends a request with a fresh id and waits for its response
// (any other response first fails the test).
func (s *rawServe) request(method, params string) message {
	s.t.Helper()
	s.seq++
	id := strconv.Itoa(1000 + s.seq)
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params))
	m := s.next()
	if string(m.ID) != id {
		s.t.Fatalf("%s: want the answer to id %s, got %s", method, id, m.raw)
	}
	return m
}

// toolResult is the part of a tools/call result the tests read.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		URI  string `json:"uri"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func (s *rawServe) tool(name string, args map[string]any) toolResult {
	s.t.Helper()
	if name == "bash" {
		if _, ok := args["description"]; !ok {
			args["description"] = "reliability"
		}
	}
	p, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	m := s.request("tools/call", string(p))
	var r toolResult
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		s.t.Fatalf("%s %v: %s", name, args, m.raw)
	}
	return r
}

func (r toolResult) text() string {
	var out []string
	for _, c := range r.Content {
		if c.Type == "text" {
			out = append(out, c.Text)
		}
	}
	return strings.Join(out, "\n")
}

// echo runs `echo WORD` in the session and fails unless it printed it.
func (s *rawServe) echo(word string) {
	s.t.Helper()
	r := s.tool("bash", map[string]any{"command": "echo " + word})
	if lines := strings.Split(r.text(), "\n"); lines[len(lines)-1] != word || r.IsError {
		s.t.Fatalf("echo %s: %q (isError %v)", word, r.text(), r.IsError)
	}
}

// runtimeDir is the host's own directory, which teardown removes.
func (s *rawServe) runtimeDir() string {
	return filepath.Join(s.rtBase, "dsh", "host-"+strconv.Itoa(s.cmd.Process.Pid))
}

// waitExit waits (generously) for dsh to exit and returns how it did.
func (s *rawServe) waitExit(d time.Duration) syscall.WaitStatus {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(d):
		s.t.Fatalf("dsh still running %v after its client went away\nstderr:\n%s", d, s.errLog)
	}
	return s.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// marker is a number no other process's command line carries: commands
// run `sleep MARKER` so the tests can find them.
func marker(base int) string { return strconv.Itoa(base + os.Getpid()%99999) }

// alive reports whether a process with marker in its command line lives.
func alive(marker string) bool { return len(testplugins.Matching("sleep "+marker)) > 0 }

// waitGone polls until no process carries marker, several polls in a row
// (a process in the middle of exec briefly shows an empty command line).
func waitGone(t *testing.T, marker string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for absent := 0; absent < 3; time.Sleep(20 * time.Millisecond) {
		if !alive(marker) {
			absent++
			continue
		}
		absent = 0
		if time.Now().After(deadline) {
			t.Fatalf("still alive after %v: %v", d, testplugins.Matching("sleep "+marker))
		}
	}
}

// waitFor polls cond until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
