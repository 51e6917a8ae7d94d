package reliability

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
