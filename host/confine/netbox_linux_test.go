package confine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/netproxy"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testneeds"
)

// netRun wraps script for owner under mode of base as ctx.sandbox's
// client does, runs it under its confinement with its environment over
// env, and settles it.
type netRun struct {
	t    *testing.T
	r    *Runner
	m    *procs.Manager
	base *sandbox.Policy
	dir  string
}

func (n netRun) wrap(owner, mode string) *sandbox.Wrapped {
	n.t.Helper()
	own := Owned{R: n.r, Add: func(context.Context) Options { return Options{Owner: owner} }}
	w, err := own.Wrap(n.t.Context(), &sandbox.WrapRequest{Argv: []string{"bash", "-c", "true"}, Mode: mode, Policy: sandbox.ForMode(n.base, mode)})
	if err != nil {
		n.t.Fatalf("wrap for %s: %v", owner, err)
	}
	return w
}

func (n netRun) run(owner, mode, script string) (procs.Result, *sandbox.Settled) {
	n.t.Helper()
	w := n.wrap(owner, mode)
	res := n.runWrapped(w, owner, script)
	if w.Settle == "" {
		n.t.Fatalf("a proxied policy without a watch to settle: %+v", w)
	}
	st, err := n.r.Settle(n.t.Context(), &sandbox.SettleRequest{Settle: w.Settle})
	if err != nil {
		n.t.Fatalf("settle %q: %v", w.Settle, err)
	}
	return res, st
}

// runWrapped runs script under w (made for bash -c true) for owner.
func (n netRun) runWrapped(w *sandbox.Wrapped, owner, script string) procs.Result {
	n.t.Helper()
	w = proto.Clone(w).(*sandbox.Wrapped)
	w.Argv[len(w.Argv)-1] = script // bash -c <script>, wrapped or not
	if w.Runner == sandbox.RunnerBubblewrap && w.Argv[0] == "bash" {
		n.t.Fatalf("bubblewrap did not wrap: %q", w.Argv)
	}
	// The host's own proxy settings never reach a proxied command.
	env := map[string]string{"HOME": n.dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "http_proxy": "http://host-proxy.invalid:1", "NO_PROXY": "*"}
	spec := procs.Spec{Argv: w.Argv, Dir: n.dir, Owner: owner, Timeout: 60 * time.Second, Env: env}
	if w.Confinement != "" {
		confine, err := n.r.Confinement(w.Confinement)
		if err != nil {
			n.t.Fatal(err)
		}
		spec.Confine = confine
		for k, v := range n.r.Env(w.Confinement) {
			env[k] = v
		}
	}
	p, err := n.m.Spawn(spec)
	if err != nil {
		n.t.Fatalf("spawn %q: %v", script, err)
	}
	select {
	case <-p.Done():
	case <-time.After(90 * time.Second):
		n.t.Fatalf("%q did not end", script)
	}
	return p.Result()
}

// events collects what the runner tells of the network.
type events struct {
	mu  sync.Mutex
	got []netproxy.Event
}

func (e *events) add(ev netproxy.Event) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
}

func (e *events) of(host string) []netproxy.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(e.got), func(ev netproxy.Event) bool { return ev.Host != host })
}

// hostAddr is an IPv4 address of this machine's that is not loopback,
// or "".
func hostAddr() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	return ""
}

// A proxied policy (network off, proxy rules) under either runner: the
// command reaches, through the host's proxy and by the proxy's
// variables alone, what the rules allow (plain HTTP, HTTPS through
// CONNECT, SOCKS5), is refused the rest with 403, and Settle and the
// runner's OnNetwork say which was which. Without the proxy nothing
// leaves its namespace: not the host's loopback, not another address of
// the host's, not DNS or any UDP, no raw socket; its namespace holds its
// loopback alone. Each owner has its own proxy, closed with the owner.
func TestProxiedNetwork(t *testing.T) {
	testneeds.Command(t, "curl")
	testneeds.Command(t, "getent")
	python := testneeds.Command(t, "python3")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from the host") }))
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello over tls") }))
	defer tlsSrv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	tlsPort := tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	// A server on every address of the host's: reachable unconfined by a
	// non-loopback address.
	wide, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	var wideGot listener
	wideGot.serve(t, wide)
	widePort := wide.Addr().(*net.TCPAddr).Port

	for _, runner := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(runner, func(t *testing.T) {
			r := runnerFor(t, runner)
			var evs events
			r.OnNetwork(evs.add)
			ws := t.TempDir()
			n := netRun{t: t, r: r, m: newManager(t), dir: ws, base: &sandbox.Policy{
				WorkspaceRoot: ws,
				NetworkRules: &sandbox.NetworkRules{
					Allow: []string{"pkg.test", "tls.test"},
					Deny:  []string{"*.evil.test"},
					Hosts: map[string]string{"pkg.test": "127.0.0.1", "tls.test": "127.0.0.1", "other.test": "127.0.0.1", "x.evil.test": "127.0.0.1"},
				},
			}}

			// Read-only mode has a watch too, and names the proxy's layer.
			w := n.wrap("alice", sandbox.ReadOnly)
			if !strings.Contains(w.Enforcement, "network-proxy") || slices.Contains(strings.Split(w.Enforcement, ","), "network") || w.Settle == "" {
				t.Fatalf("a proxied read-only wrap: %+v", w)
			}
			v6 := ""
			if _, err := os.Stat("/proc/net/if_inet6"); err == nil {
				v6 = fmt.Sprintf("curl -sS --max-time 20 --proxy 'http://[::1]:3128' http://pkg.test:%d/; echo", port)
			}
			res, st := n.run("alice", sandbox.ReadOnly, fmt.Sprintf(`set -e
%[3]s
curl -sS --max-time 20 http://pkg.test:%[1]d/; echo
curl -sS --max-time 20 -k https://tls.test:%[2]d/; echo
curl -sS --max-time 20 --proxy "$ALL_PROXY" http://pkg.test:%[1]d/; echo
curl -s --max-time 20 -o /dev/null -w '%%{http_code}\n' http://other.test:%[1]d/
curl -s --max-time 20 -o /dev/null -w '%%{http_code}\n' http://x.evil.test:%[1]d/
curl -s --max-time 20 -o /dev/null -w '%%{http_code}\n' http://other.test:%[1]d/`, port, tlsPort, v6))
			out := ok(t, "curl through the proxy", res)
			if v6 != "" {
				out = strings.TrimPrefix(out, "hello from the host\n")
			}
			if want := "hello from the host\nhello over tls\nhello from the host\n403\n403\n403"; out != want {
				t.Fatalf("through the proxy:\n%s\nwant\n%s\nstderr %s", out, want, res.Stderr.Data)
			}
			sort.Strings(st.NetworkReached)
			if want := []string{"pkg.test:" + strconv.Itoa(port), "tls.test:" + strconv.Itoa(tlsPort)}; !slices.Equal(st.NetworkReached, want) {
				t.Errorf("reached: %q, want %q", st.NetworkReached, want)
			}
			denied := map[string]string{}
			for _, d := range st.NetworkDenied {
				if _, twice := denied[d.Host]; twice {
					t.Errorf("%s refused twice in one settle: %v", d.Host, st.NetworkDenied)
				}
				denied[d.Host] = d.Why
			}
			if why := denied["other.test:"+strconv.Itoa(port)]; why != "not in allow" || len(denied) != 2 || !strings.Contains(denied["x.evil.test:"+strconv.Itoa(port)], `"*.evil.test"`) {
				t.Errorf("denied: %v", st.NetworkDenied)
			}
			// The runner told each attempt, the owner's.
			wantPkg := 2
			if v6 != "" {
				wantPkg = 3
			}
			if got := evs.of("pkg.test"); len(got) != wantPkg || !got[0].Allowed || got[0].Owner != "alice" || got[0].Port != port {
				t.Errorf("pkg.test's events: %+v", got)
			}
			if got := evs.of("other.test"); len(got) != 2 || got[0].Allowed || got[0].Rule != "not in allow" {
				t.Errorf("other.test's events: %+v", got)
			}
			// A later settle of the same watch is what came after.
			res, st = n.run("alice", sandbox.ReadOnly, "true")
			ok(t, "true", res)
			if len(st.NetworkReached)+len(st.NetworkDenied) != 0 {
				t.Errorf("a command that reached nothing: %v %v", st.NetworkReached, st.NetworkDenied)
			}

			// What the command sees: the proxy's variables over the host's,
			// nothing that turns off a tool's certificate checks.
			out = ok(t, "env", func() procs.Result {
				res, _ := n.run("alice", sandbox.ReadOnly, "env | grep -E '^[A-Za-z_]*_[Pp][Rr][Oo][Xx][Yy]=|^(GIT_SSL_NO_VERIFY|GIT_SSL_VERIFY|NODE_TLS_REJECT_UNAUTHORIZED|PIP_TRUSTED_HOST|PIP_CERT|PYTHONHTTPSVERIFY|GOINSECURE|GONOSUMDB|GOFLAGS|NPM_CONFIG_STRICT_SSL|npm_config_strict_ssl|PYTHONWARNINGS)=' | grep -v PIP_CERT=/etc/ssl | sort")
				return res
			}())
			want := strings.Join([]string{
				"ALL_PROXY=socks5h://127.0.0.1:1080", "HTTPS_PROXY=http://127.0.0.1:3128", "HTTP_PROXY=http://127.0.0.1:3128",
				"NO_PROXY=localhost,127.0.0.1,::1", "all_proxy=socks5h://127.0.0.1:1080", "http_proxy=http://127.0.0.1:3128",
				"https_proxy=http://127.0.0.1:3128", "no_proxy=localhost,127.0.0.1,::1",
			}, "\n")
			if out != want {
				t.Errorf("the proxy's environment:\n%s\nwant\n%s", out, want)
			}

			// Without the proxy, nothing gets out. Each probe works
			// unconfined, so its failure inside is the sandbox's.
			host := hostAddr()
			probes := []struct{ name, script string }{
				{"the host's loopback, the proxy ignored", fmt.Sprintf("curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:%d/", port)},
				{"the host's loopback, no proxy variables", fmt.Sprintf("env -u http_proxy -u HTTP_PROXY -u ALL_PROXY -u all_proxy curl -sS --max-time 5 http://127.0.0.1:%d/", port)},
				{"a raw socket", python + ` -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'`},
			}
			if host != "" {
				probes = append(probes, struct{ name, script string }{"tcp to another address of the host's", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", host, widePort)})
			}
			unconfined := wideGot.got.Load()
			for _, pr := range probes {
				if res := run(t, n.m, ws, nil, pr.script); res.ExitCode != 0 {
					t.Fatalf("%s fails unconfined too: exit %d %s", pr.name, res.ExitCode, res.Stderr.Data)
				}
			}
			if host != "" {
				// The unconfined connection is counted once the server
				// accepts it, which a loaded machine may do only after
				// the probe has ended: wait for it, so it is not taken
				// for one from inside.
				for deadline := time.Now().Add(20 * time.Second); wideGot.got.Load() == unconfined; {
					if time.Now().After(deadline) {
						t.Fatal("the host's non-loopback server never counted the unconfined connection")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			// Not probed unconfined: this machine may have no DNS or no
			// route out; inside they must fail whatever the machine has.
			probes = append(probes,
				struct{ name, script string }{"DNS", "getent hosts example.com"},
				struct{ name, script string }{"a UDP send to 1.1.1.1:53", "echo x > /dev/udp/1.1.1.1/53"},
				struct{ name, script string }{"a UDP send to the host's address", fmt.Sprintf("echo x > /dev/udp/%s/53", cmpOr(host, "192.0.2.1"))},
				struct{ name, script string }{"tcp to 1.1.1.1:80", "exec 3<>/dev/tcp/1.1.1.1/80"},
			)
			wideBefore := wideGot.got.Load()
			for _, pr := range probes {
				res, _ := n.run("alice", sandbox.ReadOnly, pr.script)
				if res.ExitCode == 0 {
					t.Errorf("%s: exit 0 inside, want a failure (%q)", pr.name, res.Stdout.Data)
				}
			}
			if wideGot.got.Load() != wideBefore {
				t.Errorf("the host's non-loopback server was reached from inside")
			}
			// Its namespace holds its loopback and nothing else (bwrap
			// added none of its own), with the proxy on it.
			out = ok(t, "interfaces", func() procs.Result {
				res, _ := n.run("alice", sandbox.ReadOnly, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; awk '$4 == "0A" {print $2}' /proc/net/tcp | sort`)
				return res
			}())
			// lo; listening on 127.0.0.1 (0100007F): 1080 (0438) and 3128 (0C38).
			if out != "lo\n0100007F:0438\n0100007F:0C38" {
				t.Errorf("the namespace's interfaces and TCP sockets:\n%s", out)
			}

			// Workspace-write: one watch for the guard and the proxy.
			res, st = n.run("alice", sandbox.WorkspaceWrite, fmt.Sprintf("git init -q sub && curl -sS --max-time 20 http://pkg.test:%d/ && curl -s -o /dev/null http://other.test:%d/", port, port))
			ok(t, "workspace-write through the proxy", res)
			if len(st.Undone) == 0 || len(st.NetworkReached) != 1 || len(st.NetworkDenied) != 1 {
				t.Errorf("workspace-write settle: %v", st)
			}

			// A watch kept (a terminal's) goes on for both: each settle
			// tells what came since the last.
			w = n.wrap("alice", sandbox.WorkspaceWrite)
			ok(t, "first", n.runWrapped(w, "alice", fmt.Sprintf("git init -q kept && curl -sS --max-time 20 http://pkg.test:%d/", port)))
			st, err = r.Settle(t.Context(), &sandbox.SettleRequest{Settle: w.Settle, Keep: true})
			if err != nil || len(st.Undone) == 0 || !slices.Equal(st.NetworkReached, []string{"pkg.test:" + strconv.Itoa(port)}) || !strings.Contains(st.Settle, "+") {
				t.Fatalf("the first settle of a kept watch: %v %v", st, err)
			}
			ok(t, "second", n.runWrapped(w, "alice", fmt.Sprintf("curl -s -o /dev/null --max-time 20 http://other.test:%d/", port)))
			st, err = r.Settle(t.Context(), &sandbox.SettleRequest{Settle: st.Settle})
			if err != nil || len(st.Undone) != 0 || len(st.NetworkReached) != 0 || len(st.NetworkDenied) != 1 {
				t.Fatalf("the kept watch's next settle: %v %v", st, err)
			}

			// Each owner its own proxy; a policy without rules is no
			// owner's.
			a, b := n.wrap("alice", sandbox.ReadOnly), n.wrap("bob", sandbox.ReadOnly)
			if a.Confinement == b.Confinement || a.Settle == b.Settle {
				t.Fatalf("alice and bob share a proxy: %q %q", a.Confinement, b.Confinement)
			}
			plain := netRun{t: t, r: r, m: n.m, dir: ws, base: &sandbox.Policy{WorkspaceRoot: ws}}
			if pa, pb := plain.wrapNoSettle("alice"), plain.wrapNoSettle("bob"); pa.Confinement != pb.Confinement || strings.Contains(pa.Enforcement, "proxy") {
				t.Errorf("without rules, the owner counts: %+v %+v", pa, pb)
			}
			res, _ = n.run("bob", sandbox.ReadOnly, fmt.Sprintf("curl -sS --max-time 20 http://pkg.test:%d/", port))
			ok(t, "bob through his proxy", res)
			if got := evs.of("pkg.test"); got[len(got)-1].Owner != "bob" {
				t.Errorf("bob's event: %+v", got[len(got)-1])
			}

			// Release closes alice's proxy: its listeners refuse in its
			// namespace; bob's goes on.
			netns := heldNetNS(t, r, a.Confinement)
			defer unix.Close(netns)
			if err := dialIn(netns, "127.0.0.1:3128"); err != nil {
				t.Fatalf("alice's proxy before the release: %v", err)
			}
			if err := r.Release("alice", ""); err != nil {
				t.Fatal(err)
			}
			if err := dialIn(netns, "127.0.0.1:3128"); !errors.Is(err, unix.ECONNREFUSED) {
				t.Errorf("alice's proxy after the release: %v, want connection refused", err)
			}
			if _, err := r.Confinement(a.Confinement); err == nil {
				t.Errorf("alice's confinement outlived her release")
			}
			if _, err := r.Settle(t.Context(), &sandbox.SettleRequest{Settle: a.Settle}); err == nil {
				t.Errorf("alice's watch outlived her release")
			}
			res, _ = n.run("bob", sandbox.ReadOnly, fmt.Sprintf("curl -sS --max-time 20 http://pkg.test:%d/", port))
			ok(t, "bob after alice's release", res)
			must(t, r.Close())
			noProxyGoroutines(t)
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (n netRun) wrapNoSettle(owner string) *sandbox.Wrapped {
	n.t.Helper()
	own := Owned{R: n.r, Add: func(context.Context) Options { return Options{Owner: owner} }}
	w, err := own.Wrap(n.t.Context(), &sandbox.WrapRequest{Argv: []string{"true"}, Mode: sandbox.ReadOnly, Policy: sandbox.ForMode(n.base, sandbox.ReadOnly)})
	if err != nil {
		n.t.Fatal(err)
	}
	return w
}

// heldNetNS is a copy of the network namespace fd of the confinement
// token names.
func heldNetNS(t *testing.T, r *Runner, token string) int {
	t.Helper()
	r.mu.Lock()
	h, _ := r.prepared[token].(*held)
	r.mu.Unlock()
	var fd int
	switch c := h.c.(type) {
	case *Confinement:
		fd = c.ns.net
	case *bwrapNet:
		fd = c.netns
	default:
		t.Fatalf("%s holds %T", token, h)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return dup
}

// dialIn connects to addr from inside the network namespace netns.
func dialIn(netns int, addr string) error {
	var err error
	onOwnThread(func() {
		if err = unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
			return
		}
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, 10*time.Second); err == nil {
			c.Close()
		}
	})
	return err
}

// noProxyGoroutines waits until no goroutine of a proxy is left.
func noProxyGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(bounded.Bound)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "host/netproxy.") && !strings.Contains(stacks, "confine.startBox") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a proxy's goroutines outlived its close:\n%s", stacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Bubblewrap.Wrap alone puts a proxied policy's command in a network
// namespace of bwrap's, with no proxy: only the Runner, which enters the
// proxy's namespace before bwrap starts, leaves --unshare-net out, and
// gives the command the proxy's variables; bwrap's other namespaces stay.
func TestBubblewrapProxiedArgs(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	p := &sandbox.Policy{NetworkRules: &sandbox.NetworkRules{Allow: []string{"example.com"}}}
	alone, err := b.Wrap(p, sandbox.ReadOnly, Options{}, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	joined, err := b.wrap(p, sandbox.ReadOnly, Options{}, []string{"true"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(alone, "--unshare-net") || slices.Contains(alone, "HTTP_PROXY") {
		t.Errorf("Wrap alone: %q", alone)
	}
	if slices.Contains(joined, "--unshare-net") {
		t.Errorf("joined: bwrap makes a network namespace: %q", joined)
	}
	for _, want := range []string{"--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--cap-drop"} {
		if !slices.Contains(joined, want) {
			t.Errorf("joined: no %s: %q", want, joined)
		}
	}
	set := map[string]string{}
	for i, a := range joined {
		if a == "--setenv" {
			set[joined[i+1]] = joined[i+2]
		}
	}
	for k, v := range proxyEnv() {
		if set[k] != v {
			t.Errorf("joined: %s=%q, want %q", k, set[k], v)
		}
	}
	// The same policy with the network on is not proxied.
	on, err := b.wrap(&sandbox.Policy{Network: true, NetworkRules: p.NetworkRules}, sandbox.ReadOnly, Options{}, []string{"true"}, true)
	if err != nil || slices.Contains(on, "HTTP_PROXY") || slices.Contains(on, "--unshare-net") {
		t.Errorf("network on: %q %v", on, err)
	}
}

// Rules the proxy cannot take are refused at Wrap, under either runner,
// naming the entry.
func TestProxiedWrapRefusesBadRules(t *testing.T) {
	for _, runner := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(runner, func(t *testing.T) {
			r := runnerFor(t, runner)
			p := &sandbox.Policy{NetworkRules: &sandbox.NetworkRules{Allow: []string{"exa mple.com"}}}
			w, err := r.Wrap(t.Context(), &sandbox.WrapRequest{Argv: []string{"true"}, Mode: sandbox.ReadOnly, Policy: p})
			if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "the network rules") || !strings.Contains(err.Error(), "exa mple.com") {
				t.Fatalf("%+v %v", w, err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.nets) != 0 || len(r.prepared) != 0 {
				t.Errorf("a refused wrap left %v %v", r.nets, r.prepared)
			}
		})
	}
}

// A tunnel is told when both its ends are closed: a settle right after
// the command ended still tells the one whose far end closed a while
// after the command closed its own.
func TestProxiedSettleWaitsForTunnels(t *testing.T) {
	// The far end: says hi, reads to the end, and closes 300 ms later.
	slow, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	go func() {
		for {
			c, err := slow.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("hi"))
				io.Copy(io.Discard, c)
				time.Sleep(300 * time.Millisecond)
			}()
		}
	}()
	port := slow.Addr().(*net.TCPAddr).Port
	for _, runner := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(runner, func(t *testing.T) {
			r := runnerFor(t, runner)
			ws := t.TempDir()
			n := netRun{t: t, r: r, m: newManager(t), dir: ws, base: &sandbox.Policy{
				NetworkRules: &sandbox.NetworkRules{Allow: []string{"slow.test"}, Hosts: map[string]string{"slow.test": "127.0.0.1"}},
			}}
			// CONNECT, then the tunnel's first bytes (the proxy's answer, 39
			// bytes, and hi), then the command ends.
			res, st := n.run("alice", sandbox.ReadOnly, fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/3128
printf 'CONNECT slow.test:%d HTTP/1.1\r\nHost: slow.test\r\n\r\n' >&3
head -c 41 <&3 | tail -c 2`, port))
			if out := ok(t, "a tunnel", res); out != "hi" {
				t.Fatalf("through the tunnel: %q", out)
			}
			if want := []string{"slow.test:" + strconv.Itoa(port)}; !slices.Equal(st.NetworkReached, want) {
				t.Errorf("reached: %q, want %q", st.NetworkReached, want)
			}
		})
	}
}
