//go:build linux

package mcpserver

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
)

const bashComp = `
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`

// The console sees a session and its running call, and cancels the call:
// the command's process is gone, the client (which did not cancel) is
// answered with a line saying so, and the session serves the next call;
// on each transport.
func TestCancelCallFromTheConsole(t *testing.T) {
	s, _ := serveComp(t, bashComp)
	changes, stop := s.AgentChanges()
	defer stop()
	<-changes // the first signal comes at once

	t.Run("memory", func(t *testing.T) {
		known := ownerIDs(s)
		cs := connectUser(t, s, legacy, nil)
		cancelFromConsole(t, s, cs, known, changes, "sleep 37.25")
	})
	t.Run("stdio", func(t *testing.T) {
		known := ownerIDs(s)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- s.RunStdio(context.Background(), inR, outW) }()
		cs := clientOn(t, &mcp.IOTransport{Reader: outR, Writer: inW}, legacy, nil)
		cancelFromConsole(t, s, cs, known, changes, "sleep 37.5")
		cs.Close()
		inW.Close()
		bounded.Receive(t, done, "the server's end")
		outR.Close()
	})
	t.Run("http", func(t *testing.T) {
		known := ownerIDs(s)
		hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{}))
		defer hs.Close()
		cs := clientOn(t, &mcp.StreamableClientTransport{Endpoint: hs.URL}, legacy, nil)
		cancelFromConsole(t, s, cs, known, changes, "sleep 37.75")
		cs.Close()
	})
}

func ownerIDs(s *Server) map[string]bool {
	known := map[string]bool{}
	for _, o := range s.Owners() {
		known[o.ID] = true
	}
	return known
}

// cancelFromConsole runs marker (a sleep) through cs, the session's
// first call, and cancels it as the console does.
func cancelFromConsole(t *testing.T, s *Server, cs *mcp.ClientSession, known map[string]bool, changes <-chan struct{}, marker string) {
	t.Helper()
	var owner OwnerView
	eventually(t, "the session is listed", func() bool {
		for _, o := range s.Owners() {
			if !known[o.ID] {
				owner = o
				return true
			}
		}
		return false
	})
	if owner.Client != "approver 1" || !ownerForm.MatchString(owner.ID) || time.Since(owner.Since) > wait {
		t.Fatalf("owner %+v", owner)
	}
	select {
	case <-changes:
	case <-time.After(wait):
		t.Fatal("no change signalled for the new session")
	}

	type answer struct {
		r   *mcp.CallToolResult
		err error
	}
	answered := make(chan answer, 1)
	began := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": marker, "description": "sleeps"}})
		answered <- answer{r, err}
	}()
	var call CallView
	eventually(t, "the call is in flight and its command runs", func() bool {
		calls := s.CallsInFlight()
		if len(calls) == 1 {
			call = calls[0]
		}
		return len(calls) == 1 && len(testplugins.Matching(marker)) > 0
	})
	if call.Owner != owner.ID || call.Tool != "bash" || call.Command != marker || !strings.HasPrefix(call.ID, "c") || call.Started.Before(began.Add(-time.Second)) {
		t.Fatalf("call %+v (owner %s)", call, owner.ID)
	}
	if s.CancelCall("c999999") || s.CancelCall("nonsense") {
		t.Fatal("cancelled a call that does not run")
	}
	if !s.CancelCall(call.ID) {
		t.Fatalf("CancelCall(%s) found no call", call.ID)
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(wait):
		t.Fatal("the cancelled call was not answered")
	}
	if a.err != nil {
		t.Fatalf("the cancelled call: %v", a.err)
	}
	if text := resultText(a.r); text != cancelledNote || !a.r.IsError {
		t.Fatalf("the cancelled call's answer: %q (is error %v)", text, a.r.IsError)
	}
	if took := time.Since(began); took > 25*time.Second {
		t.Fatalf("the cancelled call took %v", took)
	}
	eventually(t, "the command's process is gone", func() bool { return len(testplugins.Matching(marker)) == 0 })
	if calls := s.CallsInFlight(); len(calls) != 0 {
		t.Fatalf("calls after the end: %+v", calls)
	}
	if s.CancelCall(call.ID) {
		t.Fatal("cancelled an ended call")
	}
	if out := plainBash(t, cs, "echo still here"); !strings.Contains(out, "still here") {
		t.Fatalf("the next call: %q", out)
	}
}

func TestCallSummary(t *testing.T) {
	for args, want := range map[string]string{
		`{"command":"ls -l","description":"x"}`: "ls -l",
		`{"op":"read","id":"t1","waitMs":1000}`: "id=t1 op=read waitMs=1000",
		`{}`:                                    "",
		`not json`:                              "not json",
		`{"command":"` + strings.Repeat("é", 300) + `x"}`: strings.Repeat("é", 300) + "x",
	} {
		if got := summary([]byte(args)); got != want {
			t.Errorf("summary(%s) = %q, want %q", args, got, want)
		}
	}
	if got := summary([]byte(`{"text":"` + strings.Repeat("a", 500) + `"}`)); len([]rune(got)) != maxSummary || !strings.HasSuffix(got, "…") {
		t.Errorf("a long summary is %d runes: %q", len([]rune(got)), got)
	}
}

// The books cost a call no allocation but the map's.
func BenchmarkCallBooks(b *testing.B) {
	s := &Server{calls: map[uint64]inflight{}}
	args := []byte(`{"command":"true"}`)
	stop := func() {}
	b.ReportAllocs()
	for b.Loop() {
		s.untrack(s.track("mcp-x", "bash", args, stop))
	}
}
