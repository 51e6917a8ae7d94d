package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/host/netproxy"
)

// networkCalls: what the sandbox's network proxy costs. Through the real
// binaries: the bash tool's `curl` GET of a local server under bash-sandbox
// (landlock) with a network map that allows it, so the request goes
// through the host's proxy, against the same GET under `network: true`
// (the host's network, no proxy), interleaved call by call in one run, and
// a bare `true` in each.
// In process: a Go client's GET through a netproxy.Proxy against the same
// GET direct, over a kept-alive connection and over a new one each.
func networkCalls(dir string, n int) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	port := l.Addr().(*net.TCPAddr).Port

	ws := filepath.Join(dir, "ws-network")
	check(os.MkdirAll(ws, 0o755))
	comp := func(name, network string) string {
		f := filepath.Join(dir, name+".yaml")
		check(os.WriteFile(f, []byte(fmt.Sprintf(`sandbox:
  defaultMode: workspace-write
  workspaceRoot: %s
  runner: landlock
  network:%s
plugins:
  - id: env
    path: %s
  - id: bash
    path: %s
  - id: tools
    path: %s
`, ws, network, filepath.Join(dir, "dsh-shell-env"), filepath.Join(dir, "dsh-bash-sandbox"), filepath.Join(dir, "dsh-tool-bash"))), 0o600))
		return f
	}
	// Each session runs the GET and a bare `true` in turn: the difference
	// of the `true` rows is what the proxied network costs a command that
	// does not use it (its namespace, listeners and settling).
	type server struct {
		name, get string
		cs        *mcp.ClientSession
		gets, nop []time.Duration
	}
	servers := []*server{
		{name: "network: true", get: fmt.Sprintf("curl -sS --noproxy '*' http://127.0.0.1:%d/", port)},
		{name: "network map", get: fmt.Sprintf("curl -sS http://bench.test:%d/", port)},
	}
	comps := []string{
		comp("network-direct", " true"),
		comp("network-proxied", "\n    allow: [bench.test]\n    hosts: {bench.test: 127.0.0.1}"),
	}
	call := func(s *server, command, want string) error {
		r, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command, "description": "bench", "workdir": ws}})
		if err != nil {
			return err
		}
		var text []string
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		if got := strings.Join(text, "\n"); r.IsError || got != want {
			return fmt.Errorf("%s: %q", command, got)
		}
		return nil
	}
	var live []*server
	for i, s := range servers {
		// A composition this dsh cannot serve is said, and the rest measured.
		cmd := exec.Command(filepath.Join(dir, "dsh"), "serve", "--log-level", "error", comps[i])
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "dsh-bench", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			fmt.Printf("network: %s not measured: %v %s\n", s.name, err, strings.TrimSpace(stderr.String()))
			continue
		}
		s.cs = cs
		defer s.cs.Close()
		for j := 0; j < 5 && err == nil; j++ {
			err = call(s, s.get, "ok") // warm up
		}
		if err != nil {
			fmt.Printf("network: %s not measured: %v\n", s.name, err)
			continue
		}
		live = append(live, s)
	}
	timed := func(f func() error) time.Duration {
		t := time.Now()
		check(f())
		return time.Since(t)
	}
	for i := 0; i < n; i++ {
		for _, s := range live {
			s.gets = append(s.gets, timed(func() error { return call(s, s.get, "ok") }))
			s.nop = append(s.nop, timed(func() error { return call(s, "true", "") }))
		}
	}
	fmt.Println("bash tool calls over MCP under bash-sandbox (landlock): a network map (through the proxy) against network: true (direct)")
	for _, s := range live {
		row(s.name+", curl GET", s.gets)
		row(s.name+", true", s.nop)
	}
	if len(live) == 2 {
		d, p := live[0], live[1]
		ms := func(a, b []time.Duration) float64 { return float64(median(a)-median(b)) / float64(time.Millisecond) }
		fmt.Printf("  network map against network: true (median): curl GET %+.2f ms; true %+.2f ms (what a command pays that does not use the network)\n",
			ms(p.gets, d.gets), ms(p.nop, d.nop))
	}

	proxyOverhead(port, n*10)
	fmt.Println()
}

// proxyOverhead: a Go client's GET of the server on 127.0.0.1:port
// through a netproxy.Proxy (the name mapped by its hosts, as a sandbox's
// would be) against the same GET direct, interleaved.
func proxyOverhead(port, n int) {
	p, err := netproxy.New(netproxy.Config{Owner: "bench", Rules: netproxy.Rules{Allow: []string{"bench.test"}, Hosts: map[string]string{"bench.test": "127.0.0.1"}}})
	check(err)
	defer p.Close()
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go func() { _ = p.ServeHTTP(pl) }()
	proxyURL := &url.URL{Scheme: "http", Host: pl.Addr().String()}

	client := func(proxied, keepAlive bool) *http.Client {
		tr := &http.Transport{DisableKeepAlives: !keepAlive, Proxy: nil}
		if proxied {
			tr.Proxy = http.ProxyURL(proxyURL)
		}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	get := func(c *http.Client, u string) time.Duration {
		t := time.Now()
		resp, err := c.Get(u)
		check(err)
		body, err := io.ReadAll(resp.Body)
		check(err)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			fail(fmt.Sprintf("GET %s: %d %q", u, resp.StatusCode, body))
		}
		return time.Since(t)
	}
	direct := fmt.Sprintf("http://127.0.0.1:%d/", port)
	viaProxy := fmt.Sprintf("http://bench.test:%d/", port)
	fmt.Println("in process: a Go client's GET through netproxy against direct")
	for _, keepAlive := range []bool{true, false} {
		d, px := client(false, keepAlive), client(true, keepAlive)
		get(d, direct)
		get(px, viaProxy)
		var dt, pt []time.Duration
		for i := 0; i < n; i++ {
			dt = append(dt, get(d, direct))
			pt = append(pt, get(px, viaProxy))
		}
		what := "kept alive"
		if !keepAlive {
			what = "new conn each"
		}
		row("direct, "+what, dt)
		row("netproxy, "+what, pt)
		fmt.Printf("  netproxy, %s: %+.1f µs (median)\n", what, float64(median(pt)-median(dt))/float64(time.Microsecond))
	}
}
