package reliability

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// Malformed JSON-RPC lines on stdin: each is answered with the error
// JSON-RPC prescribes, and the session goes on: pings, tool calls and a
// background job started before the bad lines.
func TestMCPMalformedLinesKeepTheSession(t *testing.T) {
	s := startRaw(t, toolsComp)
	m := marker(500000)
	job := s.tool("bash", map[string]any{"command": "sleep " + m, "run_in_background": true})
	var started struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(job.StructuredContent, &started); err != nil || started.JobID == "" {
		t.Fatalf("background start: %s", job.StructuredContent)
	}
	if !waitFor(30*time.Second, func() bool { return alive(m) }) {
		t.Fatal("the background job never ran")
	}

	huge := `{"jsonrpc":"2.0","id":99,"method":"ping","params":{"x":"` + strings.Repeat("a", 16<<20) + `"}}`
	cases := []struct {
		name, line string
		code       int
		id         string // the id of the error reply, "null" when it cannot be known
	}{
		{"invalid JSON", `{"jsonrpc":"2.0","id":1,"method":"ping"`, -32700, "null"},
		{"a batch array", `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, -32600, "2"},
		{`a message without "jsonrpc"`, `{"id":3,"method":"ping"}`, -32600, "3"},
		{"an object id", `{"jsonrpc":"2.0","id":{"n":4},"method":"ping"}`, -32600, "null"},
		{"nesting 1,000 deep", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}`, -32600, "5"},
		{"a frame over 16 MiB", huge, -32600, "99"},
	}
	for i, c := range cases {
		f := fault(t, "stdio: "+c.name)
		s.send(c.line)
		reply := s.next()
		var batch []message
		if strings.HasPrefix(string(reply.raw), "[") {
			// A batch is answered as JSON-RPC answers batches: an array,
			// one error per call in it.
			if err := json.Unmarshal(reply.raw, &batch); err != nil || len(batch) != 1 {
				t.Fatalf("%s: reply %s", c.name, reply.raw)
			}
			reply = batch[0]
		}
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(reply.Error, &e); err != nil || string(reply.JSONRPC) != `"2.0"` || e.Message == "" {
			t.Fatalf("%s: not a JSON-RPC error: %.300s", c.name, reply.raw)
		}
		if e.Code != c.code || string(reply.ID) != c.id {
			t.Fatalf("%s: error %d with id %s, want %d with id %s (%.300s)", c.name, e.Code, reply.ID, c.code, c.id, reply.raw)
		}
		f.Saw("answered %d, id %s: %q", e.Code, reply.ID, e.Message)
		if r := s.request("ping", "{}"); r.Error != nil {
			t.Fatalf("ping after %s: %s", c.name, r.raw)
		}
		s.echo(fmt.Sprintf("after-%d", i))
		if !alive(m) {
			t.Fatalf("the background job died after %s", c.name)
		}
		f.Saw("then a ping, a command, and the background job alive")
	}

	f := fault(t, "stdio: after every malformed line")
	out := s.tool("job_output", map[string]any{"job_id": started.JobID})
	if !strings.Contains(out.text(), "still running") {
		t.Fatalf("job_output: %q", out.text())
	}
	f.Saw("job %s still running, read in the same session", started.JobID)
}

// The client goes away with a reply pending: dsh ends the session as at
// end of input and tears everything down (no SIGPIPE death that leaves the
// runtime directory, sockets and spill files behind).
func TestMCPClientGoneMidCall(t *testing.T) {
	cases := []struct {
		name  string
		leave func(s *rawServe)
	}{
		{"stops reading stdout, stdin left open", func(s *rawServe) { _ = s.stdout.Close() }},
		{"exits: stdin, stdout and stderr all close", func(s *rawServe) {
			_ = s.stdout.Close()
			_ = s.stderr.Close()
			_ = s.stdin.Close()
		}},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			f := fault(t, "stdio: the client "+c.name+" mid-call")
			s := startRaw(t, toolsComp)
			bg, fg := marker(510000+20000*i), marker(520000+20000*i)
			s.tool("bash", map[string]any{"command": "sleep " + bg, "run_in_background": true})
			// A spill file, so teardown has one to remove.
			s.tool("bash", map[string]any{"command": "seq 1 50000"})
			rt := s.runtimeDir()
			if spills, _ := os.ReadDir(rt + "/spill"); len(spills) == 0 {
				t.Fatalf("no spill folder in %s", rt)
			}
			// This call answers once the client has gone: its reply is the
			// write that finds the pipe closed. (bash's command line carries
			// the marker while it waits.)
			gate := filepath.Join(t.TempDir(), "go")
			script := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; : sleep %s", gate, fg)
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"bash","arguments":{"command":%q,"description":"pending"}}}`, script))
			if !waitFor(30*time.Second, func() bool { return alive(bg) && alive(fg) }) {
				t.Fatal("the commands never ran")
			}
			c.leave(s)
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			ws := s.waitExit(90 * time.Second)
			if ws.Signaled() || ws.ExitStatus() != 0 {
				t.Fatalf("dsh ended with %v (signal %v), want a clean exit after teardown", ws.ExitStatus(), ws.Signal())
			}
			f.Saw("dsh exited 0")
			if _, err := os.Stat(rt); !os.IsNotExist(err) {
				t.Fatalf("runtime directory %s still there (%v)", rt, err)
			}
			f.Saw("runtime directory gone")
			waitGone(t, bg, 10*time.Second)
			waitGone(t, fg, 10*time.Second)
			if !waitFor(10*time.Second, func() bool { return len(testplugins.Running(binDir)) == 0 }) {
				t.Fatalf("left behind: %v", testplugins.Running(binDir))
			}
			f.Saw("no process of the composition left")
		})
	}
}

// A call the client cancels gets no response after notifications/cancelled,
// its command tree is killed, and the session goes on.
func TestMCPCancelledCallGetsNoLateResponse(t *testing.T) {
	f := fault(t, "stdio: notifications/cancelled during a command")
	s := startRaw(t, toolsComp, "--log-level", "debug")
	m := marker(560000)
	s.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"bash","arguments":{"command":"setsid sleep ` + m + ` & sleep ` + m + `","description":"cancelled"}}}`)
	if !waitFor(30*time.Second, func() bool { return len(testplugins.Matching("sleep "+m)) >= 2 }) {
		t.Fatal("the command never ran")
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"the user changed their mind"}}`)
	waitGone(t, m, 30*time.Second)
	f.Saw("command tree killed")
	// The go-sdk answers a cancelled call once its handler returns; dsh
	// logs that it dropped the answer. Anything written for c1 until then
	// (or before the next answer) is a late response.
	dropped := func() bool { return strings.Contains(s.errLog.String(), "dropped the response to a cancelled request") }
	for deadline := time.Now().Add(60 * time.Second); !dropped(); {
		select {
		case line := <-s.lines:
			var msg message
			if json.Unmarshal(line, &msg) == nil && string(msg.ID) == `"c1"` {
				t.Fatalf("a response after notifications/cancelled: %s", line)
			}
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled call's handler never returned")
		}
	}
	if r := s.request("ping", "{}"); r.Error != nil {
		t.Fatalf("ping: %s", r.raw)
	}
	f.Saw("no response for the cancelled call")
	for i := 0; i < 20; i++ {
		s.echo(fmt.Sprintf("next-%d", i))
	}
	f.Saw("20 later commands exit 0")
}

// An empty spill file read through resources/read is a valid, empty text
// content (the TypeScript SDK rejects an item with neither text nor blob).
func TestMCPEmptySpillResource(t *testing.T) {
	f := fault(t, "resources/read of an empty spill file")
	s := startRaw(t, toolsComp)
	r := s.tool("bash", map[string]any{"command": "seq 1 50000"})
	var facts struct {
		Stdout struct {
			SpillPath string `json:"spillPath"`
		} `json:"stdout"`
	}
	_ = json.Unmarshal(r.StructuredContent, &facts)
	var link string
	for _, c := range r.Content {
		if c.Type == "resource_link" {
			link = c.URI
		}
	}
	if facts.Stdout.SpillPath == "" || link == "" {
		t.Fatalf("no spill file: %s", r.StructuredContent)
	}
	dir := facts.Stdout.SpillPath[:strings.LastIndex(facts.Stdout.SpillPath, "/")]
	s.tool("bash", map[string]any{"command": ": > " + dir + "/empty.stdout"})
	uri := link[:strings.LastIndex(link, "/")] + "/empty.stdout"
	m := s.request("resources/read", `{"uri":"`+uri+`"}`)
	var res struct {
		Contents []map[string]json.RawMessage `json:"contents"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || len(res.Contents) != 1 {
		t.Fatalf("resources/read: %s", m.raw)
	}
	c := res.Contents[0]
	if string(c["text"]) != `""` || c["blob"] != nil || string(c["uri"]) != `"`+uri+`"` {
		t.Fatalf("empty resource: %s, want an empty text content", m.raw)
	}
	f.Saw("%s", strings.TrimSpace(string(m.Result)))
	s.echo("after")
	f.Saw("the next command runs")
}
