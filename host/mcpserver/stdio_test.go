package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/syncbuf"
)

// peer drives a StdioTransport with raw lines, as a client would.
type peer struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan []byte
	log   *syncbuf.Buffer
	done  chan error
}

// testTools hears the block tool start and end.
type testTools struct {
	started chan struct{}
	ended   chan struct{}
	release chan struct{} // closed: block calls return even uncancelled
}

// toolServer is a go-sdk server with two tools: echo answers its
// arguments; block runs until its call is cancelled (or tt.release).
func toolServer() (*mcp.Server, *testTools) {
	tt := &testTools{started: make(chan struct{}, 8), ended: make(chan struct{}, 8), release: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tt.started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-tt.release:
		}
		defer func() { tt.ended <- struct{}{} }()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}, IsError: true}, nil
	})
	return srv, tt
}

func newPeer(t *testing.T, maxFrame int) (*peer, *testTools) {
	t.Helper()
	srv, tt := toolServer()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &peer{t: t, in: inW, lines: make(chan []byte, 64), log: &syncbuf.Buffer{}, done: make(chan error, 1)}
	logger := hclog.New(&hclog.LoggerOptions{Output: p.log, Level: hclog.Debug})
	go func() {
		p.done <- srv.Run(context.Background(), &StdioTransport{Reader: inR, Writer: outW, MaxFrame: maxFrame, Logger: logger})
	}()
	go func() {
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				close(p.lines)
				return
			}
			p.lines <- line
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Error("server did not end at end of input")
		}
		outR.Close()
	})
	p.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := p.reply(); string(r["id"]) != `"init"` || r["error"] != nil {
		t.Fatalf("initialize: %v", r)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p, tt
}

func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("send: %v", err)
	}
}

// next returns the next line the server wrote.
func (p *peer) next() []byte {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("the server closed its output")
		}
		return l
	case <-time.After(30 * time.Second):
		p.t.Fatal("no line from the server in 30s")
	}
	return nil
}

// reply returns the next line as an object.
func (p *peer) reply() map[string]json.RawMessage {
	p.t.Helper()
	line := p.next()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		p.t.Fatalf("reply %q: %v", line, err)
	}
	return m
}

// ping checks that the session still answers, and that nothing else was
// written before the answer.
func (p *peer) ping(id int) {
	p.t.Helper()
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
	if r := p.reply(); string(r["id"]) != fmt.Sprint(id) || r["error"] != nil {
		p.t.Fatalf("ping %d: %v", id, r)
	}
}

func errorOf(t *testing.T, r map[string]json.RawMessage) (code int, id string) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(r["error"], &e); err != nil || e.Message == "" || string(r["jsonrpc"]) != `"2.0"` {
		t.Fatalf("not a JSON-RPC error: %v (%v)", r, err)
	}
	if _, ok := r["id"]; !ok {
		t.Fatalf("error without an id member: %v", r)
	}
	return e.Code, string(r["id"])
}

func TestStdioMalformedLines(t *testing.T) {
	p, _ := newPeer(t, 4096)
	deep := `{"jsonrpc":"2.0","id":40,"method":"ping","params":{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}`
	cases := []struct {
		name, line string
		code       int
		id         string
	}{
		{"invalid JSON", `{"jsonrpc":"2.0","id":1,"method":`, -32700, "null"},
		{"not JSON at all", `hello`, -32700, "null"},
		{"unterminated nesting", strings.Repeat("[", 1000), -32700, "null"},
		{"no jsonrpc member", `{"id":10,"method":"ping"}`, -32600, "10"},
		{"wrong version", `{"jsonrpc":"1.0","id":"v","method":"ping"}`, -32600, `"v"`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, "null"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, "null"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, -32600, "null"},
		{"method not a string", `{"jsonrpc":"2.0","id":11,"method":5}`, -32600, "11"},
		{"neither request nor response", `{"jsonrpc":"2.0"}`, -32600, "null"},
		{"a scalar", `42`, -32600, "null"},
		{"nested 1000 deep", deep, -32600, "40"},
		{"empty batch", `[]`, -32600, "null"},
		{"over the frame limit", `{"jsonrpc":"2.0","id":41,"method":"ping","params":{"x":"` + strings.Repeat("a", 5000) + `"}}`, -32600, "41"},
		{"over the limit, many reads long", `{ "jsonrpc" : "2.0", "id" : "big", "method":"ping","params":{"x":"` + strings.Repeat("a", 200<<10) + `"}}`, -32600, `"big"`},
		{"over the limit, id after the params", `{"jsonrpc":"2.0","method":"ping","params":{"x":"` + strings.Repeat("a", 5000) + `"},"id":42}`, -32600, "null"},
		{"over the limit, id past what is read of it", `{"jsonrpc":"2.0","pad":"` + strings.Repeat("a", 2000) + `","id":43,"method":"ping","params":{"x":"` + strings.Repeat("a", 5000) + `"}}`, -32600, "null"},
		{"over the limit, an object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping","params":{"x":"` + strings.Repeat("a", 5000) + `"}}`, -32600, "null"},
		{"over the limit, not an object", `["` + strings.Repeat("a", 5000) + `"]`, -32600, "null"},
	}
	for i, c := range cases {
		p.send(c.line)
		code, id := errorOf(t, p.reply())
		if code != c.code || id != c.id {
			t.Errorf("%s: code %d id %s, want %d %s", c.name, code, id, c.code, c.id)
		}
		p.ping(100 + i)
	}

	// A batch: each call refused with its own id, in one array; the
	// notification in it gets nothing.
	p.send(`[{"jsonrpc":"2.0","id":50,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"},7]`)
	var batch []map[string]json.RawMessage
	if line := p.next(); json.Unmarshal(line, &batch) != nil || len(batch) != 3 {
		t.Fatalf("batch reply: %s", line)
	}
	for i, want := range []string{"50", `"b"`, "null"} {
		if code, id := errorOf(t, batch[i]); code != -32600 || id != want {
			t.Errorf("batch member %d: code %d id %s, want -32600 %s", i, code, id, want)
		}
	}
	// A batch of notifications is not answered at all.
	p.send(`[{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	p.ping(200)
	// Blank lines and CRLF endings are fine.
	p.send("")
	p.send(`{"jsonrpc":"2.0","id":201,"method":"ping"}` + "\r")
	if r := p.reply(); string(r["id"]) != "201" {
		t.Fatalf("CRLF ping: %v", r)
	}
	// And the session still calls tools.
	p.send(`{"jsonrpc":"2.0","id":300,"method":"tools/call","params":{"name":"echo","arguments":{"k":"v"}}}`)
	if r := p.reply(); string(r["id"]) != "300" || !strings.Contains(string(r["result"]), `{\"k\":\"v\"}`) {
		t.Fatalf("tools/call after the bad lines: %v", r)
	}
}

// A response the client cancelled is never written; the next request
// reusing its id is answered.
func TestStdioCancelledCallGetsNoResponse(t *testing.T) {
	p, tt := newPeer(t, 0)
	p.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	bounded.Receive(t, tt.started, "the tool call's start")
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	bounded.Receive(t, tt.ended, "the tool call's end")
	// The handler has returned; wait until the go-sdk has handed its
	// response to the transport (which drops it), then check that nothing
	// was written before the next answer.
	for !strings.Contains(p.log.String(), "dropped the response to a cancelled request") {
		select {
		case l := <-p.lines:
			t.Fatalf("written after the cancellation: %s", l)
		case <-time.After(10 * time.Millisecond):
		}
	}
	p.ping(8)
	// id 7 is free again: this call is answered.
	p.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if r := p.reply(); string(r["id"]) != "7" || r["result"] == nil {
		t.Fatalf("reused id: %v", r)
	}
	// A cancellation of a request already answered changes nothing.
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	p.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if r := p.reply(); string(r["id"]) != "7" || r["result"] == nil {
		t.Fatalf("id reused after a stale cancellation: %v", r)
	}
}

// A cancel right behind its call (one write: the call has had no time to
// start) stops it too: stdio is read in order, and the go-sdk books a call
// before it reads the next message, so the cancel always finds it.
func TestStdioCancelRightBehindItsCall(t *testing.T) {
	p, tt := newPeer(t, 0)
	p.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","arguments":{}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	// Whether the call started or not, its answer is made and dropped.
	for deadline := time.Now().Add(bounded.Bound); !strings.Contains(p.log.String(), "dropped the response to a cancelled request"); {
		select {
		case l := <-p.lines:
			t.Fatalf("written after the cancellation: %s", l)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled call made no answer in %v", bounded.Bound)
		}
	}
	select {
	case <-tt.started:
		bounded.Receive(t, tt.ended, "the end of the cancelled call")
	default:
	}
	p.ping(8)
}

// A write that fails (the client stopped reading) ends the session.
func TestStdioBrokenOutputEndsSession(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background(), &StdioTransport{Reader: inR, Writer: outW}) }()
	outR.Close()
	go io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed pipe") {
			t.Fatalf("session ended with %v, want the write error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the session outlived its broken output")
	}
}
