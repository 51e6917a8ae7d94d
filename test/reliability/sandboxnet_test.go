//go:build linux

package reliability

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testneeds"
)

// The sandbox's proxy through the real binaries, as the model meets it: a
// host the rules allow is reached; one they do not is refused, and the
// result says so in a line and in the facts; an approved network_hosts
// escalation reaches it for that one run, and the next run is refused
// again.
func TestSandboxNetworkEscalation(t *testing.T) {
	testneeds.Command(t, "curl")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select { // held open through the proxy until the command is ended
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
			return
		}
		fmt.Fprintf(w, "served %s\n", r.Host)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ws := t.TempDir()
	s := startServe(t, ctx, fmt.Sprintf(`sandbox:
  defaultMode: workspace-write
  workspaceRoot: %s
  network:
    allow: [allowed.test]
    hosts: {allowed.test: 127.0.0.1, refused.test: 127.0.0.1, other.test: 127.0.0.1}
approval:
  rules:
    - {match: "curl *", decision: allow}
    - {match: "bash fetch.sh", decision: allow}
  otherwise: deny
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-sandbox
  - id: tools
    name: tool-bash
`, ws))
	curl := func(host string) string { return "curl -sS --max-time 20 http://" + host + ":" + port + "/" }
	refused := "refused.test:" + port
	line := "[sandbox: network access to " + refused + " denied]"

	text, facts := s.tool(t, ctx, "bash", map[string]any{"command": curl("allowed.test")})
	if strings.Contains(text, "the sandbox cannot confine commands here") {
		t.Skipf("no sandbox runner here: %s", text)
	}
	if !strings.Contains(text, "served allowed.test:"+port) || strings.Contains(text, "[sandbox:") {
		t.Fatalf("an allowed host: %q %v", text, facts)
	}
	if sb, _ := facts["sandbox"].(map[string]any); fmt.Sprint(sb["networkReached"]) != "[allowed.test:"+port+"]" {
		t.Fatalf("an allowed host's facts: %v", facts["sandbox"])
	}

	text, facts = s.tool(t, ctx, "bash", map[string]any{"command": curl("refused.test")})
	sb, _ := facts["sandbox"].(map[string]any)
	if !strings.Contains(text, line) || strings.Contains(text, "served") || strings.Contains(text, "file access denied") ||
		sb["denialSource"] != "proxy" || fmt.Sprint(sb["networkDenied"]) != "["+refused+"]" {
		t.Fatalf("a refused host: %q %v", text, sb)
	}

	text, _ = s.tool(t, ctx, "bash", map[string]any{"command": curl("refused.test"), "network_hosts": []string{refused}, "justification": "the test needs it"})
	if !strings.Contains(text, "served "+refused) || strings.Contains(text, "[sandbox:") {
		t.Fatalf("an approved host: %q", text)
	}

	// The approval covered that one run.
	text, _ = s.tool(t, ctx, "bash", map[string]any{"command": curl("refused.test")})
	if !strings.Contains(text, line) || strings.Contains(text, "served") {
		t.Fatalf("the run after an approved one: %q", text)
	}

	// In the background: the approved host is reached, the other refused,
	// and the job's final read says which.
	// (a script: an allow rule never matches a command with a ;)
	if err := os.WriteFile(filepath.Join(ws, "fetch.sh"), []byte(curl("refused.test")+"\n"+curl("other.test")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	started, _ := s.tool(t, ctx, "bash", map[string]any{"command": "bash fetch.sh", "workdir": ws, "run_in_background": true,
		"network_hosts": []string{refused}, "justification": "the test needs it"})
	jid := jobID(started)
	var read string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(read, "finished"); time.Sleep(50 * time.Millisecond) {
		more, _ := s.tool(t, ctx, "job_output", map[string]any{"job_id": jid})
		if time.Now().After(deadline) {
			t.Fatalf("the background job did not end: %q", read)
		}
		read += more
	}
	if !strings.Contains(read, "served "+refused) || !strings.Contains(read, "[sandbox: network access to other.test:"+port+" denied]") || strings.Contains(read, line) {
		t.Fatalf("a background job: %q", read)
	}

	// A refused escalation runs nothing.
	text, _ = s.tool(t, ctx, "bash", map[string]any{"command": "wget -q -O- http://" + refused + "/", "network_hosts": []string{refused}, "justification": "the test needs it"})
	if !strings.Contains(text, "[network access to "+refused+" was denied: no approval rule matches, and otherwise is deny; nothing was run]") {
		t.Fatalf("a refused escalation: %q", text)
	}

	// A command timed out with a request open through the proxy: the next
	// one is served, and the refused host still refused.
	text, _ = s.tool(t, ctx, "bash", map[string]any{"command": "curl -sS http://allowed.test:" + port + "/slow", "timeoutMs": 1500})
	if !strings.Contains(text, "[timed out after 1500ms]") {
		t.Fatalf("a command held by a slow host: %q", text)
	}
	if text, _ = s.tool(t, ctx, "bash", map[string]any{"command": curl("allowed.test")}); !strings.Contains(text, "served allowed.test:"+port) {
		t.Fatalf("after a timed-out command: %q", text)
	}

	// The executor killed: its restart reaches and refuses as before (the
	// proxy is the host's).
	killed(t, pluginPid(t, "bash-sandbox"), syscall.SIGKILL)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		text, _ = s.tool(t, ctx, "bash", map[string]any{"command": curl("allowed.test")})
		if strings.Contains(text, "served allowed.test:"+port) {
			break
		}
		if time.Now().After(deadline) || (!strings.Contains(text, "restart") && !strings.Contains(text, "exited") && !strings.Contains(text, "not provided") && !strings.Contains(text, "gone")) {
			t.Fatalf("after the executor's kill: %q", text)
		}
	}
	if text, _ = s.tool(t, ctx, "bash", map[string]any{"command": curl("refused.test")}); !strings.Contains(text, line) || strings.Contains(text, "served") {
		t.Fatalf("a refused host after the executor's restart: %q", text)
	}
}
