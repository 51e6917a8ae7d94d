package confine

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/internal/testneeds"
)

// What a proxied command might try against the proxy itself, under either
// runner: take its ports (the proxy's listeners are there before the
// command, and share them with nobody), or use it to reach the host's own
// listeners by an IP literal, localhost or another address of the host's
// when only names are allowed.
func TestProxiedCommandCannotTakeTheProxy(t *testing.T) {
	testneeds.Command(t, "curl")
	python := testneeds.Command(t, "python3")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the host's own") }))
	defer srv.Close()
	wide, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	var wideGot listener
	wideGot.serve(t, wide)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	widePort := wide.Addr().(*net.TCPAddr).Port

	// Bind each address with SO_REUSEADDR and SO_REUSEPORT: print what
	// bound.
	binds := []string{"127.0.0.1 3128", "127.0.0.1 1080", "0.0.0.0 3128", "0.0.0.0 1080"}
	if _, err := os.Stat("/proc/net/if_inet6"); err == nil {
		binds = append(binds, "::1 3128", ":: 3128", "::1 1080")
	}
	bindScript := python + ` -c '
import socket, sys
for spec in sys.argv[1:]:
    host, port = spec.split()
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        s.bind((host, int(port))); s.listen(1); print("bound", host, port)
    except OSError as e:
        pass
'`
	for _, b := range binds {
		bindScript += ` '` + b + `'`
	}

	for _, runner := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(runner, func(t *testing.T) {
			r := runnerFor(t, runner)
			var evs events
			r.OnNetwork(evs.add)
			ws := t.TempDir()
			n := netRun{t: t, r: r, m: newManager(t), dir: ws, base: &sandbox.Policy{
				WorkspaceRoot: ws,
				NetworkRules:  &sandbox.NetworkRules{Allow: []string{"pkg.test", "localhost"}},
			}}
			res, _ := n.run("alice", sandbox.ReadOnly, bindScript)
			if out := ok(t, "bind the proxy's ports", res); out != "" {
				t.Errorf("a command took the proxy's ports:\n%s", out)
			}
			// The proxy still answers, the command's own attempts aside.
			targets := []string{
				fmt.Sprintf("http://127.0.0.1:%d/", port),
				fmt.Sprintf("http://localhost:%d/", port),
				fmt.Sprintf("http://[::1]:%d/", port),
				fmt.Sprintf("http://127.0.0.2:%d/", port),
				fmt.Sprintf("http://0.0.0.0:%d/", port),
			}
			if host := hostAddr(); host != "" {
				targets = append(targets, fmt.Sprintf("http://%s:%d/", host, widePort))
			}
			var script []string
			for _, u := range targets {
				script = append(script,
					fmt.Sprintf("curl -s --noproxy '' --max-time 20 -o /dev/null -w '%%{http_code}\\n' %s", u),
					fmt.Sprintf("curl -s --noproxy '' --max-time 20 -o /dev/null -w '%%{http_code}\\n' --proxy \"$ALL_PROXY\" %s", u))
			}
			res, _ = n.run("alice", sandbox.ReadOnly, strings.Join(script, "\n"))
			out := res.Stdout.Data
			for i, code := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if code != "403" && code != "000" {
					t.Errorf("%q: %s, want a refusal", script[i], code)
				}
			}
			if got := len(strings.Split(strings.TrimSpace(string(out)), "\n")); got != len(script) {
				t.Errorf("%d answers for %d attempts: %q", got, len(script), out)
			}
			// Every attempt reached the proxy and was refused there.
			evs.mu.Lock()
			got := slices.Clone(evs.got)
			evs.mu.Unlock()
			if len(got) != len(script) {
				t.Errorf("%d attempts told, want %d: %+v", len(got), len(script), got)
			}
			for _, ev := range got {
				if ev.Allowed {
					t.Errorf("allowed: %+v", ev)
				}
			}
			if wideGot.got.Load() != 0 {
				t.Errorf("the host's listener on every address was reached")
			}
		})
	}
}
