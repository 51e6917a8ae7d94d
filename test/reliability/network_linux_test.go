package reliability

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/nettest"
	"github.com/dshrun/dsh/internal/testneeds"
)

// netComp serves bash-sandbox under runner with network as its
// sandbox.network section (indented under it). Its approval section allows
// one escalation, `curl -sS http://other.test:PORT/approved` with the
// hosts it names, and denies every other.
func netComp(ws, runner, network string) string {
	return fmt.Sprintf(`sandbox:
  defaultMode: workspace-write
  workspaceRoot: %s
  runner: %s
  network:
%sapproval:
  rules:
    - {match: "curl -sS --max-time 20 http://other.test:*/approved", decision: allow}
  otherwise: deny
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-sandbox
  - id: tools
    name: tool-bash
`, ws, runner, network)
}

// hostListener listens on the host's first global IPv4 address (not
// loopback: a confined command's loopback is its own), over TCP and UDP,
// and counts what arrives: a command that reaches it went around the
// proxy.
type hostListener struct {
	ip       string
	tcp, udp int
	arrived  atomic.Int32
}

func listenOnHost(t *testing.T) *hostListener {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	h := &hostListener{}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			h.ip = n.IP.String()
			break
		}
	}
	if h.ip == "" {
		t.Fatalf("no global IPv4 address on this host to listen on: %v", addrs)
	}
	l, err := net.Listen("tcp", h.ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.arrived.Add(1)
			_ = c.Close()
		}
	}()
	u, err := net.ListenPacket("udp", h.ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := u.ReadFrom(buf); err != nil {
				return
			}
			h.arrived.Add(1)
		}
	}()
	h.tcp, h.udp = l.Addr().(*net.TCPAddr).Port, u.LocalAddr().(*net.UDPAddr).Port
	return h
}

// python is /usr/bin/python3 where it exists (the python3 on PATH may be
// another, without the system's modules), else the one on PATH.
func python(t *testing.T) string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return testneeds.Command(t, "python3")
}

// lineWith is the first line of text that holds s, or "".
func lineWith(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// refused403 checks a curl -sS -D - through the proxy was refused: status
// 403, X-Dsh-Denied, the body naming host, and why containing rule.
func refused403(t *testing.T, what, text, host, rule string) {
	t.Helper()
	expect(t, what, text, " 403", "X-Dsh-Denied: ", "dsh sandbox: network access to "+host)
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.ToLower(line), "x-dsh-denied:") && strings.Contains(line, rule) {
			return
		}
	}
	t.Fatalf("%s: no X-Dsh-Denied saying %q in\n%s", what, rule, text)
}

func TestSandboxNetworkLandlock(t *testing.T) { networkSession(t, "landlock") }

func TestSandboxNetworkBubblewrap(t *testing.T) {
	testneeds.Command(t, "bwrap")
	networkSession(t, "bubblewrap")
}

// A session under a sandbox.network map through the real binaries: npm and
// git reach their servers through the proxy (plain HTTP, CONNECT), curl is
// let through or refused by the rules and the model is told, a command
// that goes around the proxy (a direct connection, DNS, UDP, a raw socket)
// gets nowhere, names that lead to loopback or the metadata service are
// refused, an escalation for one more host covers one run, the host logs
// what was reached and refused; then mode limited lets GET through and
// nothing that sends. Every case is followed by the next command.
func networkSession(t *testing.T, runner string) {
	testneeds.Command(t, "curl")
	testneeds.Command(t, "git")
	testneeds.Command(t, "npm")
	py := python(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	reg, git := nettest.Registry(t), nettest.GitHTTPS(t, "git.test")
	echo, other, denied := nettest.Echo(t), nettest.Echo(t), nettest.Echo(t)
	hostL := listenOnHost(t)
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "npm"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A confined command's /tmp is its owner's own: the authority's
	// certificate goes where it can read it.
	caFile := filepath.Join(ws, "git-ca.pem")
	pem, err := os.ReadFile(git.CAFile)
	if err == nil {
		err = os.WriteFile(caFile, pem, 0o644)
	}
	if err != nil {
		t.Fatalf("the git server's authority: %v", err)
	}
	network := fmt.Sprintf(`    allow: [registry.test, "git.test:%d", "*.pkgs.test", localhost, meta.test, 169.254.169.254]
    deny: [evil.pkgs.test]
    mode: full
    hosts: {registry.test: 127.0.0.1, git.test: 127.0.0.1, good.pkgs.test: 127.0.0.1, evil.pkgs.test: 127.0.0.1, denied.test: 127.0.0.1, other.test: 127.0.0.1, meta.test: 169.254.169.254}
`, git.Port)
	s := startServe(t, ctx, netComp(ws, runner, network))
	run := func(cmd string) (string, map[string]any) {
		t.Helper()
		text, facts := s.tool(t, ctx, "bash", map[string]any{"command": cmd, "workdir": ws, "timeoutMs": 120000})
		sb, _ := facts["sandbox"].(map[string]any)
		return text, sb
	}
	next := func() { t.Helper(); s.commandsRun(t, ctx, 1) }
	regURL := fmt.Sprintf("http://registry.test:%d", reg.Port)

	f := fault(t, "network ("+runner+"): the proxy's variables, npm install and git clone through it")
	text, sb := run("echo $HTTP_PROXY $HTTPS_PROXY $ALL_PROXY $NO_PROXY")
	if text != "http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:1080 localhost,127.0.0.1,::1" || !strings.HasPrefix(fmt.Sprint(sb["enforcement"]), runner) {
		t.Fatalf("the proxy's variables: %q; facts %v", text, sb)
	}
	text, _ = run(fmt.Sprintf("cd npm && npm install dsh-left-pad --registry %s/ --cache ./.npmcache --no-audit --no-fund --no-update-notifier && cat node_modules/dsh-left-pad/index.js", regURL))
	expect(t, "npm install through the proxy", text, "added 1 package", reg.IndexJS[:20])
	if got, err := os.ReadFile(filepath.Join(ws, "npm", "node_modules", reg.Package, "index.js")); err != nil || string(got) != reg.IndexJS {
		t.Fatalf("npm install: node_modules holds %q (%v)\n%s", got, err, text)
	}
	if !reg.Saw("GET", "/"+reg.Package) || !reg.Saw("GET", reg.TarballPath()) {
		t.Fatalf("the registry saw %v", reg.Requests())
	}
	next()
	text, _ = run(fmt.Sprintf("GIT_SSL_CAINFO=%s git -c http.sslCAInfo=%[1]s clone -q %s && cat repo/%s", caFile, git.URL("git.test"), git.File))
	expect(t, "git clone through CONNECT", text, strings.TrimSpace(git.Content))
	if got, err := os.ReadFile(filepath.Join(ws, "repo", git.File)); err != nil || string(got) != git.Content {
		t.Fatalf("git clone: the work tree holds %q (%v)\n%s", got, err, text)
	}
	next()
	f.Saw("npm saw %d requests, git %d", len(reg.Requests()), len(git.Requests()))

	f = fault(t, "network ("+runner+"): curl allowed, refused by allow and by deny, over SOCKS5")
	text, sb = run(fmt.Sprintf("curl -sS --max-time 20 %s/%s", regURL, reg.Package))
	expect(t, "an allowed GET", text, `"dist-tags"`)
	if !strings.Contains(fmt.Sprint(sb["networkReached"]), "registry.test") {
		t.Fatalf("the facts of an allowed GET: %v", sb)
	}
	next()
	deniedHost := fmt.Sprintf("denied.test:%d", denied.Port)
	text, sb = run("curl -sS --max-time 20 -D - http://" + deniedHost + "/")
	refused403(t, "a host mapped but not allowed", text, "denied.test", "not in allow")
	expect(t, "a host mapped but not allowed", text, "[sandbox: network access to "+deniedHost+" denied]")
	if !strings.Contains(fmt.Sprint(sb["networkDenied"]), "denied.test") {
		t.Fatalf("the facts of a refusal: %v", sb)
	}
	if len(denied.Requests()) != 0 {
		t.Fatalf("a refused host was reached: %v", denied.Requests())
	}
	next()
	text, _ = run(fmt.Sprintf("curl -sS --max-time 20 http://good.pkgs.test:%d/wild", echo.Port))
	expect(t, "a wildcard allow", text, "GET /wild")
	text, _ = run(fmt.Sprintf("curl -sS --max-time 20 -D - http://evil.pkgs.test:%d/evil", echo.Port))
	refused403(t, "deny over a wildcard allow", text, "evil.pkgs.test", "deny")
	if echo.Saw("GET", "/evil") {
		t.Fatal("a denied host was reached")
	}
	next()
	text, _ = run(fmt.Sprintf("curl -sS --max-time 20 --proxy socks5h://127.0.0.1:1080 http://good.pkgs.test:%d/socks", echo.Port))
	expect(t, "an allowed host over SOCKS5", text, "GET /socks")
	socksRefused, _ := run(fmt.Sprintf("curl -sS --max-time 20 --proxy socks5h://127.0.0.1:1080 http://%s/socks; echo rc=$?", deniedHost))
	expect(t, "a refused host over SOCKS5", socksRefused, "[sandbox: network access to "+deniedHost+" denied]")
	if strings.Contains(socksRefused, "rc=0") || len(denied.Requests()) != 0 {
		t.Fatalf("a refused host over SOCKS5: %q; the server saw %v", socksRefused, denied.Requests())
	}
	next()
	f.Saw("allowed, refused by allow and deny, SOCKS5: %q", lineWith(socksRefused, "curl:"))

	f = fault(t, "network ("+runner+"): around the proxy: a direct connection, DNS, UDP, a raw socket")
	text, _ = run(fmt.Sprintf("curl -sS --max-time 10 --noproxy '*' http://127.0.0.1:%d/direct; echo rc=$?", echo.Port))
	if strings.Contains(text, "rc=0") || echo.Saw("GET", "/direct") {
		t.Fatalf("a direct connection to the host's loopback: %q", text)
	}
	text, _ = run(fmt.Sprintf("curl -sS --max-time 10 --noproxy '*' http://%s:%d/direct; echo rc=$?", hostL.ip, hostL.tcp))
	if strings.Contains(text, "rc=0") {
		t.Fatalf("a direct connection to the host's address: %q", text)
	}
	text, _ = run("getent hosts example.com; echo rc=$?; getent hosts registry.test; echo rc=$?")
	if strings.Contains(text, "rc=0") {
		t.Fatalf("a name resolved inside: %q", text)
	}
	text, _ = run(fmt.Sprintf(`%s -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("%s", %d)); s.sendto(b"x", ("1.1.1.1", 53))'; echo rc=$?`, py, hostL.ip, hostL.udp))
	if strings.Contains(text, "rc=0") {
		t.Fatalf("a UDP send: %q", text)
	}
	text, _ = run(fmt.Sprintf(`%s -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'; echo rc=$?`, py))
	if strings.Contains(text, "rc=0") {
		t.Fatalf("a raw socket: %q", text)
	}
	// What was sent has had time to arrive: nothing did.
	time.Sleep(200 * time.Millisecond)
	if n := hostL.arrived.Load(); n != 0 {
		t.Fatalf("%d connections or packets reached the host's address around the proxy", n)
	}
	next()
	f.Saw("direct, DNS, UDP, raw all failed; nothing reached the host")

	f = fault(t, "network ("+runner+"): loopback by name, the metadata address by name and literally")
	// NO_PROXY names localhost: --noproxy '' sends it through the proxy.
	text, _ = run(fmt.Sprintf("curl -sS --max-time 20 --noproxy '' -D - http://localhost:%d/rebound", echo.Port))
	refused403(t, "localhost, allowed but not in hosts", text, "localhost", "loopback")
	text, _ = run("curl -sS --max-time 20 -D - http://meta.test/latest/meta-data/")
	refused403(t, "a name mapped to the metadata address", text, "meta.test", "metadata")
	text, _ = run("curl -sS --max-time 20 -D - http://169.254.169.254/latest/meta-data/")
	refused403(t, "the metadata address literally, though allowed", text, "169.254.169.254", "metadata")
	if echo.Saw("GET", "/rebound") {
		t.Fatal("localhost reached the host's loopback")
	}
	next()
	f.Saw("all three refused with 403")

	f = fault(t, "network ("+runner+"): an escalation for one more host, approved once, then refused")
	approved := fmt.Sprintf("curl -sS --max-time 20 http://other.test:%d/approved", other.Port)
	otherHost := fmt.Sprintf("other.test:%d", other.Port)
	text, isErr := s.bash(t, ctx, map[string]any{"command": approved, "workdir": ws, "network_hosts": []string{otherHost}, "justification": "the test's other server"})
	if isErr || !strings.Contains(text, "GET /approved") {
		t.Fatalf("an approved escalation: %q (isError %v)", text, isErr)
	}
	text, _ = run(approved)
	expect(t, "the call after an approved one", text, "[sandbox: network access to "+otherHost+" denied]")
	if n := len(other.Requests()); n != 1 {
		t.Fatalf("the approved host saw %d requests, want 1: %v", n, other.Requests())
	}
	next()
	marker := filepath.Join(ws, "refused-ran")
	text, isErr = s.bash(t, ctx, map[string]any{"command": fmt.Sprintf("touch %s; curl -sS --max-time 20 http://%s/refused", marker, otherHost), "workdir": ws, "network_hosts": []string{otherHost}, "justification": "not approved"})
	if !isErr || !strings.Contains(text, "nothing was run") {
		t.Fatalf("a refused escalation: %q (isError %v)", text, isErr)
	}
	mustNotExist(t, "a refused escalation's command", marker)
	if other.Saw("GET", "/refused") {
		t.Fatal("a refused escalation reached its host")
	}
	next()
	f.Saw("approved: reached once; refused: %q", lastLine(text))

	f = fault(t, "network ("+runner+"): the host's log")
	// The line of the host's log that holds every one of words.
	logged := func(words ...string) string {
		t.Helper()
	lines:
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			for _, w := range append(words, "owner=") {
				if !strings.Contains(line, w) {
					continue lines
				}
			}
			return line
		}
		t.Fatalf("no line with %q and its owner in the host's log:\n%s", words, s.stderr)
		return ""
	}
	reached, refused := logged("network reached", "registry.test"), logged("network refused", "denied.test")
	logged("network reached", "git.test", "CONNECT")
	logged("network reached", "other.test")
	f.Saw("%s / %s", reached[strings.Index(reached, "network reached"):], refused[strings.Index(refused, "network refused"):])

	limitedSession(t, ctx, runner, git, caFile)
}

// limitedSession: mode limited lets plain GET through, refuses a POST
// before it leaves, and refuses CONNECT and SOCKS5, whose content the
// proxy cannot see.
func limitedSession(t *testing.T, ctx context.Context, runner string, git *nettest.GitServer, caFile string) {
	echo := nettest.Echo(t)
	ws := t.TempDir()
	// Each session's /tmp is its own: the certificate goes in this one's
	// workspace, so that only the proxy can fail the TLS request.
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(ws, "git-ca.pem")
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, ctx, netComp(ws, runner, `    allow: [echo.test, git.test]
    mode: limited
    hosts: {echo.test: 127.0.0.1, git.test: 127.0.0.1}
`))
	run := func(cmd string) string {
		t.Helper()
		text, _ := s.tool(t, ctx, "bash", map[string]any{"command": cmd, "workdir": ws})
		return text
	}
	f := fault(t, "network ("+runner+", limited): GET passes, POST, CONNECT and SOCKS5 refused")
	echoURL := fmt.Sprintf("http://echo.test:%d", echo.Port)
	expect(t, "a GET in limited mode", run("curl -sS --max-time 20 "+echoURL+"/get"), "GET /get")
	s.commandsRun(t, ctx, 1)
	text := run("curl -sS --max-time 20 -D - -X POST -d x " + echoURL + "/post")
	refused403(t, "a POST in limited mode", text, "echo.test", "limited mode")
	if echo.Saw("POST", "/post") {
		t.Fatal("a POST in limited mode reached the server")
	}
	s.commandsRun(t, ctx, 1)
	before := len(git.Requests())
	text = run(fmt.Sprintf("curl -sS --max-time 20 --cacert %s %s/HEAD; echo rc=$?", caFile, git.URL("git.test")))
	expect(t, "CONNECT in limited mode", text, "403")
	if strings.Contains(text, "rc=0") || len(git.Requests()) != before {
		t.Fatalf("CONNECT in limited mode: %q; the server saw %v", text, git.Requests()[before:])
	}
	s.commandsRun(t, ctx, 1)
	text = run(fmt.Sprintf("curl -sS --max-time 20 --proxy socks5h://127.0.0.1:1080 %s/socks; echo rc=$?", echoURL))
	if strings.Contains(text, "rc=0") || echo.Saw("GET", "/socks") {
		t.Fatalf("SOCKS5 in limited mode: %q", text)
	}
	s.commandsRun(t, ctx, 1)
	f.Saw("GET reached, POST refused unseen, CONNECT and SOCKS5 refused: %q", lineWith(text, "curl:"))
}
