package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/testplugins"
)

// binDir holds the plugin binaries the approval tests build
// (elicit_test.go); "" until one builds them.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		if runtime.GOOS == "linux" {
			if left := testplugins.Running(binDir); len(left) > 0 {
				fmt.Fprintf(os.Stderr, "plugin processes left behind: %v\n", left)
				code = 1
			}
		}
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction(procs.SpawnerGoroutine)); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

const wait = 30 * time.Second

// emptyHost is a host with no plugins: its spill folders are all these
// tests need.
func emptyHost(t *testing.T) *host.Host {
	t.Helper()
	none := func(string) (string, bool) { return "", false }
	comp, err := composition.Parse(filepath.Join(t.TempDir(), "comp.yaml"), []byte("plugins: []\n"), none)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(context.Background(), comp, host.Options{RuntimeBase: t.TempDir(), LookupEnv: none})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close host: %v", err)
		}
	})
	return h
}

func writeSpill(t *testing.T, s *Server, owner, name string, data []byte) string {
	t.Helper()
	dir := s.h.SpillDir(owner)
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSpillLinks(t *testing.T) {
	s := New(Options{Host: emptyHost(t)})
	const owner = "mcp-0123"
	full := writeSpill(t, s, owner, "p1.stdout", []byte("12345"))
	part := writeSpill(t, s, owner, "p1.stderr", []byte("123"))
	odd := writeSpill(t, s, owner, "a b#c", []byte("x"))
	missing := filepath.Join(s.h.SpillDir(owner), "gone.stdout")
	// The host passes on only the owner's own files; titles are the tool's.
	links := s.spillLinks(owner, []host.Resource{
		{Path: full, Title: "full output", Complete: true},
		{Path: part, Title: "partial stderr"},
		{Path: odd, Title: "full output", Complete: true},
		{Path: missing, Title: "full output", Complete: true},
	})
	type got struct {
		uri, name, title, mime string
		size                   int64
	}
	var gots []got
	for _, c := range links {
		l, ok := c.(*mcp.ResourceLink)
		if !ok {
			t.Fatalf("not a resource link: %#v", c)
		}
		g := got{l.URI, l.Name, l.Title, l.MIMEType, -1}
		if l.Size != nil {
			g.size = *l.Size
		}
		gots = append(gots, g)
	}
	sort.Slice(gots, func(a, b int) bool { return gots[a].name < gots[b].name })
	want := []got{
		{"dsh-spill://mcp-0123/a%20b%23c", "a b#c", "full output: a b#c", "text/plain", 1},
		{"dsh-spill://mcp-0123/gone.stdout", "gone.stdout", "full output: gone.stdout", "text/plain", -1},
		{"dsh-spill://mcp-0123/p1.stderr", "p1.stderr", "partial stderr: p1.stderr", "text/plain", 3},
		{"dsh-spill://mcp-0123/p1.stdout", "p1.stdout", "full output: p1.stdout", "text/plain", 5},
	}
	if len(gots) != len(want) {
		t.Fatalf("links %+v, want %+v", gots, want)
	}
	for i := range want {
		if gots[i] != want[i] {
			t.Errorf("link %+v, want %+v", gots[i], want[i])
		}
	}
	if l := s.spillLinks(owner, nil); l != nil {
		t.Fatalf("links of no resources: %v", l)
	}
}

// session is one client connected to s in memory.
type session struct {
	cs    *mcp.ClientSession
	owner string
}

// connect opens a session and finds the owner the server gave it: made
// when the client says it is initialized, or, for a client of the
// stateless protocol (no initialize), at the session's first request.
func connect(t *testing.T, s *Server, version string) *session {
	t.Helper()
	known := map[string]bool{}
	s.omu.Lock()
	for _, r := range s.owners {
		o := r.id
		known[o] = true
	}
	s.omu.Unlock()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.MCP().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	se := &session{cs: cs}
	if version == "" {
		_, _ = se.read("dsh-spill://probe/none")
	}
	eventually(t, "the session gets an owner", func() bool {
		s.omu.Lock()
		defer s.omu.Unlock()
		for _, r := range s.owners {
			o := r.id
			if !known[o] {
				se.owner = o
				return true
			}
		}
		return false
	})
	return se
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", wait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (se *session) read(uri string) (*mcp.ReadResourceResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return se.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
}

// released waits until the server has released every ended session, so
// no release goroutine outlives the test.
func released(t *testing.T, s *Server) {
	t.Helper()
	eventually(t, "every ended session is released", func() bool {
		s.omu.Lock()
		defer s.omu.Unlock()
		for _, r := range s.all {
			if !r.stateless { // a principal's lives as long as the host
				return false
			}
		}
		return true
	})
}

// legacy is the protocol version with initialize; "" is the client's
// latest.
const legacy = "2025-11-25"

var ownerForm = regexp.MustCompile(`^mcp-[0-9a-f]{32}$`)

func TestOwnersAreOpaqueAndStablePerSession(t *testing.T) {
	s := New(Options{Host: emptyHost(t), ReleaseGrace: time.Millisecond})
	a, b := connect(t, s, legacy), connect(t, s, "")
	if !ownerForm.MatchString(a.owner) || !ownerForm.MatchString(b.owner) || a.owner == b.owner {
		t.Fatalf("owners %q and %q, want two distinct mcp-<128 random bits>", a.owner, b.owner)
	}
	writeSpill(t, s, a.owner, "p1.stdout", []byte("mine"))
	// The same session is the same owner on every request.
	for range 3 {
		r, err := a.read(spillURI(a.owner, "p1.stdout"))
		if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != "mine" {
			t.Fatalf("owner's read: %+v %v", r, err)
		}
	}
	for ss, r := range s.owners {
		if again := s.owner(ss, nil); again != r.id {
			t.Fatalf("owner of a session changed: %q then %q", r.id, again)
		}
	}
	// What a session owns goes after its grace once it ends; another
	// session's stays.
	writeSpill(t, s, b.owner, "p2.stdout", []byte("b's"))
	for range 3 {
		if r, err := b.read(spillURI(b.owner, "p2.stdout")); err != nil || r.Contents[0].Text != "b's" {
			t.Fatalf("read of a session without initialize: %+v %v", r, err)
		}
	}
	a.cs.Close()
	eventually(t, "the ended session's spill folder is removed", func() bool {
		_, err := os.Stat(s.h.SpillDir(a.owner))
		return os.IsNotExist(err)
	})
	if r, err := b.read(spillURI(b.owner, "p2.stdout")); err != nil || r.Contents[0].Text != "b's" {
		t.Fatalf("the other session's file after the release: %+v %v", r, err)
	}
	b.cs.Close()
	released(t, s)
}

func TestReadSpill(t *testing.T) {
	s := New(Options{Host: emptyHost(t), ReleaseGrace: time.Millisecond})
	a, b := connect(t, s, legacy), connect(t, s, legacy)
	writeSpill(t, s, a.owner, "out.stdout", []byte("hello\n"))
	writeSpill(t, s, a.owner, "empty.stdout", nil)
	writeSpill(t, s, a.owner, "bin.stdout", []byte{0xff, 0xfe, 0})
	writeSpill(t, s, a.owner, "sub/x.stdout", []byte("deeper"))
	writeSpill(t, s, b.owner, "b.stdout", []byte("b's secret"))

	uri := spillURI(a.owner, "out.stdout")
	r, err := a.read(uri)
	if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != "hello\n" || r.Contents[0].MIMEType != "text/plain" || r.Contents[0].URI != uri || r.Contents[0].Blob != nil {
		t.Fatalf("read: %+v %v", r, err)
	}
	r, err = a.read(spillURI(a.owner, "empty.stdout"))
	if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != "" || r.Contents[0].Blob != nil || r.Contents[0].MIMEType != "text/plain" {
		t.Fatalf("empty file: %+v %v", r, err)
	}
	r, err = a.read(spillURI(a.owner, "bin.stdout"))
	if err != nil || len(r.Contents) != 1 || string(r.Contents[0].Blob) != "\xff\xfe\x00" || r.Contents[0].MIMEType != "application/octet-stream" {
		t.Fatalf("binary file: %+v %v", r, err)
	}

	// To any other session the file does not exist, whatever the URI.
	for _, c := range []struct {
		who  *session
		uri  string
		name string
	}{
		{b, uri, "another owner's file"},
		{a, spillURI(b.owner, "b.stdout"), "another owner's file, asked by the owner in the URI's file part"},
		{a, "dsh-spill://" + a.owner + "/..%2F" + b.owner + "%2Fb.stdout", "a way out through .."},
		{a, "dsh-spill://" + a.owner + "/%2E%2E", "the parent folder"},
		{a, "dsh-spill://" + a.owner + "/.", "the folder itself"},
		{a, "dsh-spill://" + a.owner + "/", "no file"},
		{a, "dsh-spill://" + a.owner + "/sub%2Fx.stdout", "a file below the folder"},
		{a, "dsh-spill://" + a.owner + "/sub%5Cx.stdout", "a backslash"},
		{a, "dsh-spill://" + a.owner + "/missing", "a missing file"},
		{a, "dsh-spill://" + a.owner + "/%2Fetc%2Fpasswd", "an absolute path"},
		{a, "file:///etc/passwd", "another scheme"},
	} {
		if r, err := c.who.read(c.uri); err == nil {
			t.Errorf("%s (%s): read %+v", c.name, c.uri, r)
		} else if !strings.Contains(err.Error(), "not found") {
			t.Errorf("%s (%s): %v, want not found", c.name, c.uri, err)
		}
	}
	a.cs.Close()
	b.cs.Close()
	released(t, s)
}

// On the wire an empty file is an explicit empty text, which clients that
// require text or blob accept.
func TestEmptySpillOnTheWire(t *testing.T) {
	s := New(Options{Host: emptyHost(t), ReleaseGrace: time.Millisecond})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.RunStdio(context.Background(), inR, outW) }()
	lines := bufio.NewReader(outR)
	next := func() map[string]json.RawMessage {
		t.Helper()
		line, err := lines.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return m
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	next()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	var owner string
	eventually(t, "the session gets an owner", func() bool {
		s.omu.Lock()
		defer s.omu.Unlock()
		for _, r := range s.owners {
			o := r.id
			owner = o
		}
		return owner != ""
	})
	writeSpill(t, s, owner, "e.stdout", nil)
	send(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"` + spillURI(owner, "e.stdout") + `"}}`)
	r := next()
	var res struct {
		Contents []map[string]json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(r["result"], &res); err != nil || len(res.Contents) != 1 {
		t.Fatalf("reply %s: %v", r["result"], err)
	}
	if text, ok := res.Contents[0]["text"]; !ok || string(text) != `""` {
		t.Fatalf("empty file on the wire: %s, want an explicit \"text\": \"\"", r["result"])
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("session: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the session did not end at end of input")
	}
	outR.Close()
	released(t, s)
}

// Over HTTP the owner is not the Mcp-Session-Id: a folder named after
// the session id is nobody's.
func TestOwnerIsNotTheSessionID(t *testing.T) {
	s := New(Options{Host: emptyHost(t), ReleaseGrace: time.Millisecond})
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{}))
	defer hs.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL}, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		t.Fatal(err)
	}
	sid := cs.ID()
	if sid == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	var owner string
	eventually(t, "the session gets an owner", func() bool {
		s.omu.Lock()
		defer s.omu.Unlock()
		for _, r := range s.owners {
			o := r.id
			owner = o
		}
		return owner != ""
	})
	if !ownerForm.MatchString(owner) || strings.Contains(owner, sid) || strings.Contains(sid, strings.TrimPrefix(owner, "mcp-")) {
		t.Fatalf("owner %q and session id %q: the owner must be opaque", owner, sid)
	}
	writeSpill(t, s, sid, "p.stdout", []byte("x"))
	writeSpill(t, s, owner, "p.stdout", []byte("mine"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: spillURI(sid, "p.stdout")}); err == nil {
		t.Fatalf("read through the session id: %+v", r)
	}
	if r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: spillURI(owner, "p.stdout")}); err != nil || r.Contents[0].Text != "mine" {
		t.Fatalf("read through the owner: %+v %v", r, err)
	}
	cs.Close()
	released(t, s)
}
