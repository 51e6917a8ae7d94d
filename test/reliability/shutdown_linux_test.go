//go:build linux

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
)

// stopComp is the default tools composition with a short stopTimeout;
// bash-local's kill grace is its default, 3000 ms.
const stopComp = `
host:
  stopTimeout: 4s
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`

// stopBound is what a stop on a signal may take under stopComp
// (stopTimeout plus the kill grace); stopMargin is the slack allowed for a
// loaded machine.
const (
	stopBound  = 4*time.Second + 3*time.Second
	stopMargin = 6 * time.Second
)

// transportWords are what no model-facing text may carry.
var transportWords = regexp.MustCompile(`(?i)grpc|\brpc\b|code = |status code|transport|connection is closing|context canceled|deadline exceeded|jsonrpc`)

// inFlight is the command of the call a signal catches: it prints, then
// sleeps; on SIGTERM (which ends the sleep) it waits for gate to exist, so
// a call sent meanwhile meets a stopping host, and ends by itself.
func inFlight(m, gate string) string {
	return fmt.Sprintf("echo started; trap 'until [ -e %s ]; do sleep 0.05; done; exit 3' TERM; sleep %s", gate, m)
}

// sleeping reports whether a process runs exactly `sleep m`: the command
// got past its trap to its sleep (bash's own command line carries the
// marker from its start).
func sleeping(m string) bool {
	for _, p := range testplugins.Matching("sleep " + m) {
		if strings.HasSuffix(p, ": sleep "+m+" ") {
			return true
		}
	}
	return false
}

// stubborn is a command that ignores SIGTERM (sleep inherits that): only
// SIGKILL ends it.
func stubborn(m string) string { return "echo started; trap '' TERM; sleep " + m }

// leftovers lists the live processes of the host with pid hostPid: dsh,
// its plugins and the watchdog (binaries of binDir), and every command
// (their environment carries mark, which dsh was started with) or plugin
// (DSH_HOST_PID) whatever its binary.
func leftovers(hostPid int, mark string) []string {
	var out []string
	for _, pid := range testplugins.Running(binDir) {
		out = append(out, fmt.Sprintf("%d (a dsh binary)", pid))
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !testplugins.Alive(pid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == "STOP_MARK="+mark || kv == "DSH_HOST_PID="+strconv.Itoa(hostPid) {
				cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				out = append(out, fmt.Sprintf("%d: %s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
				break
			}
		}
	}
	return out
}

// checkStopped checks the answer of the call the signal caught: the plain
// sentence first, then what the command printed, no transport word.
func checkStopped(t *testing.T, text string, isError bool) {
	t.Helper()
	if !strings.HasPrefix(text, host.StoppedText) || !strings.Contains(text, "started") || !isError {
		t.Fatalf("the call in flight was answered %q (isError %v), want %q, then the command's output", text, isError, host.StoppedText)
	}
	if w := transportWords.FindString(text); w != "" {
		t.Fatalf("the answer of the call in flight carries %q: %q", w, text)
	}
}

// checkExit checks dsh exited 0 within the bound, leaving nothing.
func checkExit(t *testing.T, f *Fault, ws syscall.WaitStatus, took, bound time.Duration, pid int, mark string) {
	t.Helper()
	if ws.Signaled() || ws.ExitStatus() != 0 {
		t.Fatalf("dsh ended with %d (signal %v), want exit 0", ws.ExitStatus(), ws.Signal())
	}
	if took > bound+stopMargin {
		t.Fatalf("dsh took %v to stop, want at most stopTimeout+grace (%v) plus %v", took.Round(time.Millisecond), bound, stopMargin)
	}
	f.Saw("exit 0 after %v (bound %v)", took.Round(10*time.Millisecond), bound)
	if left := leftovers(pid, mark); len(left) > 0 {
		t.Fatalf("alive after dsh exited: %v", left)
	}
	f.Saw("no process of the composition left")
}

// waitLog waits until the host's log holds want.
func waitLog(t *testing.T, log *syncbuf.Buffer, want string) {
	t.Helper()
	if !waitFor(30*time.Second, func() bool { return strings.Contains(log.String(), want) }) {
		t.Fatalf("dsh never logged %q after the signal", want)
	}
}

// slowKillComp is stopComp with a kill grace of 10 s: a stop that waits
// for it takes 10 s at least, one hurried by a second signal does not.
const slowKillComp = `
host:
  stopTimeout: 4s
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
    config:
      graceMs: 10000
  - id: tools
    name: tool-bash
`

// SIGTERM or SIGINT with a call in flight and a background job, over
// stdio: the call is answered with the plain sentence and its output, a
// call sent during the stop is refused in a plain sentence, dsh exits 0
// within stopTimeout plus the kill grace, and nothing is left. A second
// SIGTERM during the stop hurries it: the command that ignores SIGTERM is
// not given its 10 s grace, and the rest holds.
func TestStopOnSignalStdio(t *testing.T) {
	cases := []struct {
		name  string
		sigs  []syscall.Signal
		comp  string
		bound time.Duration
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, stopComp, stopBound},
		{"SIGINT", []syscall.Signal{syscall.SIGINT}, stopComp, stopBound},
		{"SIGTERM twice", []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}, slowKillComp, 4*time.Second + 10*time.Second},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fault(t, "stdio: "+c.name+" with a call in flight and a job")
			mark := fmt.Sprintf("stop-%d-%d", os.Getpid(), time.Now().UnixNano())
			s := startRawEnv(t, []string{"STOP_MARK=" + mark}, c.comp)
			job, fg := marker(600000+20000*i), marker(610000+20000*i)
			s.tool("bash", map[string]any{"command": "sleep " + job, "run_in_background": true})
			gate := filepath.Join(t.TempDir(), "gate")
			command := inFlight(fg, gate)
			if len(c.sigs) > 1 {
				command = stubborn(fg)
			}
			args, _ := json.Marshal(map[string]any{"name": "bash", "arguments": map[string]any{"command": command, "description": "in flight"}})
			s.send(`{"jsonrpc":"2.0","id":"inflight","method":"tools/call","params":` + string(args) + `}`)
			if !waitFor(30*time.Second, func() bool { return alive(job) && sleeping(fg) }) {
				t.Fatal("the commands never ran")
			}
			pid := s.cmd.Process.Pid
			sent := time.Now()
			if err := s.cmd.Process.Signal(c.sigs[0]); err != nil {
				t.Fatal(err)
			}
			waitLog(t, s.errLog, "stopping")
			s.send(`{"jsonrpc":"2.0","id":"late","method":"tools/call","params":{"name":"bash","arguments":{"command":"echo late","description":"late"}}}`)
			answers := map[string]toolResult{}
			deadline := time.After(c.bound + stopMargin)
			for len(answers) < 2 {
				select {
				case line, ok := <-s.lines:
					if !ok {
						t.Fatalf("dsh closed its stdout with answers to %d of 2 calls: %v", len(answers), answers)
					}
					var m message
					if json.Unmarshal(line, &m) != nil || m.Method != "" {
						continue
					}
					var r toolResult
					if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
						t.Fatalf("not a tool result: %s", line)
					}
					id, _ := strconv.Unquote(string(m.ID))
					answers[id] = r
					switch {
					case id != "late":
					case len(c.sigs) > 1:
						// The stop is under way (calls are refused) and the
						// call in flight waits out its grace: hurry.
						if err := s.cmd.Process.Signal(c.sigs[1]); err != nil {
							t.Fatal(err)
						}
					default:
						// The call in flight may end now.
						if err := os.WriteFile(gate, nil, 0o600); err != nil {
							t.Fatal(err)
						}
					}
				case <-deadline:
					t.Fatalf("answers to %d of 2 calls within %v of the signal: %v", len(answers), c.bound+stopMargin, answers)
				}
			}
			r := answers["inflight"]
			checkStopped(t, r.text(), r.IsError)
			f.Saw("the call in flight answered %q", strings.SplitN(r.text(), "\n", 2)[0])
			if late := answers["late"]; late.text() != host.RefusedText || !late.IsError {
				t.Fatalf("a call during the stop was answered %q (isError %v), want %q", late.text(), late.IsError, host.RefusedText)
			}
			f.Saw("a call during the stop refused: %q", host.RefusedText)
			ws := s.waitExit(c.bound + stopMargin)
			took := time.Since(sent)
			checkExit(t, f, ws, took, c.bound, pid, mark)
			if len(c.sigs) > 1 && took >= 10*time.Second {
				t.Fatalf("a second signal did not hurry the stop: %v, the whole kill grace (10s)", took.Round(time.Millisecond))
			}
		})
	}
}

// The same over streamable HTTP: the in-flight request's response
// completes with the plain sentence before the server closes.
func TestStopOnSignalHTTP(t *testing.T) {
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		name := map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT"}[sig]
		t.Run(name, func(t *testing.T) {
			stopHTTP(t, "HTTP: "+name+" with a call in flight and a job", sig, stopComp, 800000+20000*i, nil)
		})
	}
}

// stopTermComp is stopComp with terminals.
const stopTermComp = stopComp + `
  - id: term-bash
    name: terminal-bash
  - id: terminal-tools
    name: tool-terminal
`

// The same with an open terminal whose command runs on: it dies with the
// rest.
func TestStopOnSignalWithTerminal(t *testing.T) {
	stopHTTP(t, "HTTP: SIGTERM with a call in flight, a job and a terminal", syscall.SIGTERM, stopTermComp, 700000, func(ctx context.Context, cs *mcp.ClientSession) {
		m := marker(720000)
		id := openTerm(t, ctx, cs)
		sendTerm(t, ctx, cs, map[string]any{"session_id": id, "text": "sleep " + m, "waitMs": 300})
		if !waitFor(30*time.Second, func() bool { return alive(m) }) {
			t.Fatal("the terminal's command never ran")
		}
	})
}

// stopHTTP serves comp over HTTP, starts a job and a call in flight (and
// whatever more sets up), sends sig, and checks the stop.
func stopHTTP(t *testing.T, what string, sig syscall.Signal, comp string, base int, more func(context.Context, *mcp.ClientSession)) {
	f := fault(t, what)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mark := fmt.Sprintf("stop-%d-%d", os.Getpid(), time.Now().UnixNano())
	s := startHTTPEnv(t, []string{"STOP_MARK=" + mark}, comp)
	// Waited for here; the harness's own wait (a cleanup, run after
	// this one) then finds it done.
	exited := make(chan struct{})
	var exitedAt time.Time
	go func() {
		_ = s.cmd.Wait()
		exitedAt = time.Now()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-exited
		}
	})
	cs := s.connect(t, ctx)
	job, fg := marker(base), marker(base+10000)
	callText(t, ctx, cs, "bash", map[string]any{"command": "sleep " + job, "run_in_background": true})
	if more != nil {
		more(ctx, cs)
	}
	type answer struct {
		text    string
		isError bool
		err     error
	}
	call := func(command string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command, "description": "stop"}})
			if err != nil {
				ch <- answer{err: err}
				return
			}
			var out []string
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					out = append(out, tc.Text)
				}
			}
			ch <- answer{text: strings.Join(out, "\n"), isError: r.IsError}
		}()
		return ch
	}
	gate := filepath.Join(t.TempDir(), "gate")
	inflight := call(inFlight(fg, gate))
	if !waitFor(30*time.Second, func() bool { return alive(job) && sleeping(fg) }) {
		t.Fatal("the commands never ran")
	}
	pid := s.cmd.Process.Pid
	sent := time.Now()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s.stderr, "stopping")
	late := call("echo late")
	get := func(ch <-chan answer, what string) answer {
		select {
		case a := <-ch:
			if a.err != nil {
				t.Fatalf("%s: %v", what, a.err)
			}
			return a
		case <-time.After(stopBound + stopMargin):
			t.Fatalf("%s: no answer within %v of the signal", what, stopBound+stopMargin)
		}
		return answer{}
	}
	if l := get(late, "a call during the stop"); l.text != host.RefusedText || !l.isError {
		t.Fatalf("a call during the stop was answered %q (isError %v), want %q", l.text, l.isError, host.RefusedText)
	}
	f.Saw("a call during the stop refused: %q", host.RefusedText)
	// The call in flight may end now.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := get(inflight, "the call in flight")
	checkStopped(t, a.text, a.isError)
	f.Saw("the call in flight answered %q", strings.SplitN(a.text, "\n", 2)[0])
	select {
	case <-exited:
		checkExit(t, f, s.cmd.ProcessState.Sys().(syscall.WaitStatus), exitedAt.Sub(sent), stopBound, pid, mark)
	case <-time.After(stopBound + stopMargin):
		t.Fatalf("dsh still running %v after %v", stopBound+stopMargin, sig)
	}
}

// stopPersistentComp serves the persistent bash tool, whose commands run
// in the agent's terminal rather than as the call's own process.
const stopPersistentComp = `
host:
  stopTimeout: 4s
plugins:
  - id: env
    name: shell-env
  - id: term-bash
    name: terminal-bash
  - id: persistent-bash
    name: tool-bash-persistent
`

// SIGTERM with a command of the persistent bash tool in flight: the
// program in front of its terminal is interrupted, so the call is
// answered with the sentence and what the command printed, and the shell
// goes with the rest.
func TestStopOnSignalPersistentBash(t *testing.T) {
	f := fault(t, "stdio: SIGTERM with a persistent bash command in flight")
	mark := fmt.Sprintf("stop-%d-%d", os.Getpid(), time.Now().UnixNano())
	s := startRawEnv(t, []string{"STOP_MARK=" + mark}, stopPersistentComp)
	// The agent's first command says its shell is fresh, then prints.
	if r := s.tool("bash", map[string]any{"command": "echo hi"}); !strings.HasSuffix(r.text(), "]\nhi") {
		t.Fatalf("echo hi: %q", r.text())
	}
	fg := marker(740000)
	s.send(`{"jsonrpc":"2.0","id":"inflight","method":"tools/call","params":{"name":"bash","arguments":{"command":"echo going; sleep ` + fg + `","description":"in flight"}}}`)
	if !waitFor(30*time.Second, func() bool { return sleeping(fg) }) {
		t.Fatal("the command never ran")
	}
	pid := s.cmd.Process.Pid
	sent := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	m := s.next()
	var r toolResult
	if string(m.ID) != `"inflight"` || m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		t.Fatalf("want the answer to the call in flight, got %s", m.raw)
	}
	text := r.text()
	if !strings.HasPrefix(text, host.StoppedText) || !strings.Contains(text, "going") || !r.IsError {
		t.Fatalf("the call in flight was answered %q (isError %v), want %q, then the command's output", text, r.IsError, host.StoppedText)
	}
	if w := transportWords.FindString(text); w != "" {
		t.Fatalf("the answer carries %q: %q", w, text)
	}
	f.Saw("the call in flight answered %q", strings.ReplaceAll(text, "\n", " | "))
	ws := s.waitExit(stopBound + stopMargin)
	checkExit(t, f, ws, time.Since(sent), stopBound, pid, mark)
}
