package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/kubetest"
	"github.com/dshrun/dsh/internal/testplugins"
)

// kubeComp is a composition whose terminals are shells in a pod of srv
// (found by podKey, "pod: NAME" or "labelSelector: SEL"), with the
// terminal tools, the persistent bash, and termdrive's term tool (which
// resizes a terminal, as no tool of the model's does).
func kubeComp(srv *kubetest.Server, podKey string) string {
	return fmt.Sprintf(`
plugins:
  - id: env
    name: shell-env
    config:
      facts:
        DSH_COMPOSITION: kube
  - id: kube
    name: terminal-kubernetes
    config:
      kubeconfig: %s
      namespace: %s
      %s
  - id: terminal-tools
    name: tool-terminal
  - id: persistent-bash
    name: tool-bash-persistent
  - id: drive
    name: termdrive
`, srv.Kubeconfig, srv.Namespace, podKey)
}

// atPrompt fails the test unless the registry finds session id at its
// shell's prompt (the prompt's bytes, as the backend said, end the
// output) with no mark of it shown (a mark printed as text would show).
func atPrompt(t *testing.T, ctx context.Context, cs *mcp.ClientSession, id string) {
	t.Helper()
	text, _ := callText(t, ctx, cs, "term", map[string]any{"op": "read", "id": id})
	if !strings.Contains(text, `"atPrompt":true`) || strings.Contains(text, "dsh=") {
		t.Fatalf("session %s is not at a recognised prompt: %s", id, text)
	}
}

// needKubetest skips where kubetest's pods cannot be made (they are
// namespaces of this machine, made by root).
func needKubetest(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kubetest's pods need root (unshare)")
	}
}

// The terminal tools with the Kubernetes backend: a terminal opens in the
// pod a selector finds, with the size it was opened with; its prompt comes
// and a command's output comes back, settled by quiet output (no read of
// a remote terminal can be seen); a SIGINT interrupts a command in the
// pod; the pod deleted mid-session ends the session at once.
func TestKubernetesTerminalTools(t *testing.T) {
	needKubetest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := kubetest.New(t)
	srv.KeepExecsOnDisconnect(true) // as container runtimes do: the session's end is the relay's work
	if _, err := srv.AddPod("web-1", map[string]string{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	s := startHTTP(t, kubeComp(srv, "labelSelector: app=web"))
	a := s.connect(t, ctx)

	f := fault(t, "kubernetes terminal: a shell in the pod")
	text, r := callText(t, ctx, a, "terminal_open", map[string]any{"cols": 90, "rows": 30})
	m := termIDRE.FindStringSubmatch(text)
	if r.IsError || m == nil || !strings.Contains(text, "open: bash in ") {
		t.Fatalf("terminal_open: %s", text)
	}
	id := m[1]
	// The pod's hostname is its name (its UTS namespace); the shell's
	// facts and size are there.
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": `echo "[$((6*7))|$(cat /proc/sys/kernel/hostname)|$DSH_COMPOSITION|$TERM]"; stty size`, "waitMs": 10000})
	expect(t, "a command in the pod", text, "\n[42|web-1|kube|xterm-256color]\n30 90\n", "[wait: inferred_idle — ")
	if !strings.HasSuffix(strings.TrimRight(text[:strings.Index(text, "[wait:")], "\n "), "$") {
		t.Fatalf("no prompt after the command:\n%s", text)
	}
	atPrompt(t, ctx, a, id)
	f.Saw("the prompt, a command's output and the open's size in the pod; the wait settles as inferred_idle")

	f = fault(t, "kubernetes terminal: a resize")
	if text, r := callText(t, ctx, a, "term", map[string]any{"op": "resize", "id": id, "cols": 132, "rows": 43}); r.IsError {
		t.Fatalf("resize: %s", text)
	}
	// The size and the typed line reach the pod apart, in no set order:
	// the line is typed again until the size shows.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(text, "\n43 132\n"); {
		if time.Now().After(deadline) {
			t.Fatalf("stty size after a resize to 132×43:\n%s", text)
		}
		text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "stty size", "waitMs": 10000})
	}
	f.Saw("stty size in the pod saw the new size")

	f = fault(t, "kubernetes terminal: an interrupt")
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "sleep 60; echo not-inter''rupted", "waitMs": 500})
	expect(t, "sleep 60", text, "[wait: ")
	text, _ = callText(t, ctx, a, "terminal_signal", map[string]any{"session_id": id, "signal": "SIGINT"})
	expect(t, "SIGINT", text, "[SIGINT sent to the program in front of "+id)
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "echo af''ter", "waitMs": 10000})
	expect(t, "after the interrupt", text, "\nafter\n")
	if strings.Contains(text, "not-interrupted") {
		t.Fatalf("the sleep was not interrupted:\n%s", text)
	}
	f.Saw("SIGINT became Ctrl-C in the pod's terminal: the sleep ended, the shell took the next line")

	f = fault(t, "kubernetes terminal: the shell's exit, and an exec refused")
	open := func() string {
		t.Helper()
		text, r := callText(t, ctx, a, "terminal_open", map[string]any{})
		m := termIDRE.FindStringSubmatch(text)
		if r.IsError || m == nil {
			t.Fatalf("terminal_open: %s", text)
		}
		return m[1]
	}
	id2 := open()
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id2, "text": "exit 3", "waitMs": 10000})
	expect(t, "exit 3", text, "[session "+id2+" exited with code 3: close it with terminal_close]")
	callText(t, ctx, a, "terminal_close", map[string]any{"session_id": id2})
	// A close kills the relay outright; the runtime leaves the exec's
	// processes running (KeepExecsOnDisconnect), and the relay's watcher
	// in the pod ends what the shell ran there.
	id2 = open()
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id2, "text": "sleep 4242 & echo started-$!", "waitMs": 10000})
	expect(t, "a job in the pod", text, "started-")
	for deadline := time.Now().Add(20 * time.Second); !sleeping("4242"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no sleep 4242 on this machine after it started in the pod:\n%s", text)
		}
	}
	text, _ = callText(t, ctx, a, "terminal_close", map[string]any{"session_id": id2})
	expect(t, "close", text, "[terminal "+id2+" closed")
	for deadline := time.Now().Add(20 * time.Second); sleeping("4242"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job in the pod outlived its session's close by 20s")
		}
	}
	srv.Forbid("pods/exec")
	id2 = open()
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id2, "text": "", "submit": false, "waitMs": 10000})
	expect(t, "an exec refused", text, "dsh: Kubernetes does not allow this account to run commands in pod default/web-1", "[session "+id2+" exited with code 255: close it with terminal_close]")
	callText(t, ctx, a, "terminal_close", map[string]any{"session_id": id2})
	f.Saw("exit 3 ended the session with code 3; a close ended a job in the pod; a refused exec ended the session with a line that says why")

	f = fault(t, "kubernetes terminal: the pod deleted mid-session")
	text = sendTerm(t, ctx, a, map[string]any{"session_id": id, "text": "sleep 600", "waitMs": 300})
	start := time.Now()
	if err := srv.DeletePod("web-1"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !strings.Contains(text, "exited with code"); {
		text, _ = callText(t, ctx, a, "terminal_read", map[string]any{"session_id": id, "waitMs": 1000})
	}
	expect(t, "the pod deleted", text, "[session "+id+" exited with code ")
	f.Saw("the session ended %s after the pod was deleted: %s", time.Since(start).Round(100*time.Millisecond), text[strings.Index(text, "[session"):])

	// A new terminal, with no pod left: refused in words that say why.
	text, r = callText(t, ctx, a, "terminal_open", map[string]any{})
	if !r.IsError || !strings.Contains(text, "No running pod in namespace default matches the label selector app=web") {
		t.Fatalf("terminal_open without a pod: %s", text)
	}
}

// The persistent bash with the Kubernetes backend: state carries over
// between calls in the pod's shell, an exit status comes back, and the pod
// deleted mid-command is a fact in the result, not a hang; the next call
// opens a fresh shell in the pod that replaced it.
func TestKubernetesPersistentBash(t *testing.T) {
	needKubetest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := kubetest.New(t)
	srv.KeepExecsOnDisconnect(true) // as container runtimes do: the session's end is the relay's work
	if _, err := srv.AddPod("worker", nil); err != nil {
		t.Fatal(err)
	}
	s := startHTTP(t, kubeComp(srv, "pod: worker"))
	a := s.connect(t, ctx)
	dir := t.TempDir()

	f := fault(t, "kubernetes persistent bash: state between calls")
	if text, r := pbash(t, ctx, a, "cd "+dir+" && export KEPT=yes && f() { echo from-f; }"); text != noteFresh || r.IsError {
		t.Fatalf("cd and export: %q", text)
	}
	text, _ := pbash(t, ctx, a, "pwd; echo $KEPT; f; echo $DSH_COMPOSITION; cat /proc/sys/kernel/hostname; stty size")
	if text != dir+"\nyes\nfrom-f\nkube\nworker\n50 200" {
		t.Fatalf("the state of the shell: %q", text)
	}
	text, _ = pbash(t, ctx, a, "printf 'no newline'; false")
	if text != "no newline\n[exit code: 1]" {
		t.Fatalf("an exit status: %q", text)
	}
	f.Saw("cwd, exports and functions carry over in the pod's shell; exit codes come back")

	f = fault(t, "kubernetes persistent bash: a command that waits for input")
	// No read of a terminal in the pod can be seen: the command runs to
	// its timeout, and the shell goes with it.
	text, _ = pbash(t, ctx, a, "echo asking; read v", "timeoutMs", 1500)
	if !strings.HasPrefix(text, "asking\n") || !strings.Contains(text, "[timed out after 1500ms: the shell was closed with everything it ran;") {
		t.Fatalf("a command that reads: %q", text)
	}
	if text, _ = pbash(t, ctx, a, "echo fresh"); text != noteFresh+"\nfresh" {
		t.Fatalf("the call after a timeout: %q", text)
	}
	f.Saw("it ran to its timeout, and the next command ran in a fresh shell in the pod")

	f = fault(t, "kubernetes persistent bash: the pod deleted mid-command")
	done := make(chan string, 1)
	go func() {
		// Not pbash: a goroutine of its own may not end the test.
		r, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo started; sleep 6061", "description": "reliability"}})
		done <- toolText(r, err)
	}()
	// The command runs once its sleep is a process of the pod (which is
	// this machine's too).
	for deadline := time.Now().Add(30 * time.Second); len(testplugins.Matching("sleep 6061")) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command never ran in the pod")
		}
	}
	start := time.Now()
	if err := srv.DeletePod("worker"); err != nil {
		t.Fatal(err)
	}
	text = receive(t, ctx, done, "the command's result after the pod was deleted")
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the result came %s after the pod was deleted", took)
	}
	if !strings.Contains(text, "The connection to pod default/worker was lost") || !strings.Contains(text, "[the shell exited with code 255") {
		t.Fatalf("the result says nothing of the shell's end: %q", text)
	}
	f.Saw("the result came %s after the delete: %q", time.Since(start).Round(100*time.Millisecond), text)

	if _, err := srv.AddPod("worker", nil); err != nil {
		t.Fatal(err)
	}
	text, _ = pbash(t, ctx, a, "echo $KEPT; echo again")
	if text != noteFresh+"\n\nagain" {
		t.Fatalf("the call after the pod came back: %q", text)
	}
}

// A POSIX sh in the pod (shell: sh): its prompt is recognised, a command's
// output comes back, the facts are exported, and the session is an sh one.
func TestKubernetesTerminalSh(t *testing.T) {
	needKubetest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := kubetest.New(t)
	srv.KeepExecsOnDisconnect(true) // as container runtimes do: the session's end is the relay's work
	if _, err := srv.AddPod("plain", nil); err != nil {
		t.Fatal(err)
	}
	s := startHTTP(t, kubeComp(srv, "pod: plain\n      shell: sh\n      cwd: /tmp"))
	a := s.connect(t, ctx)
	text, r := callText(t, ctx, a, "terminal_open", map[string]any{})
	m := termIDRE.FindStringSubmatch(text)
	if r.IsError || m == nil || !strings.Contains(text, "open: sh in /tmp,") {
		t.Fatalf("terminal_open: %s", text)
	}
	text = sendTerm(t, ctx, a, map[string]any{"session_id": m[1], "text": `echo "[$((6*7))|$PWD|$DSH_COMPOSITION|$ENV]"; readlink /proc/$$/exe`, "waitMs": 10000})
	// A line typed before sh's first prompt is echoed ahead of it, so
	// the output may follow that prompt on its line.
	expect(t, "a command in sh", text, "[42|/tmp|kube|]\n", "[wait: inferred_idle — ")
	if !strings.HasSuffix(strings.TrimRight(text[:strings.Index(text, "[wait:")], "\n "), "$") {
		t.Fatalf("no prompt after the command:\n%s", text)
	}
	atPrompt(t, ctx, a, m[1])
	// The shell is sh (dash, busybox or bash as sh), not bash by that name.
	if strings.Contains(text, "/bash\n") {
		t.Fatalf("the shell is bash:\n%s", text)
	}
}

// compositions/kubernetes.yaml as it ships, pointed at the test server by
// the variables it reads: the bash tool and a terminal both run in the
// pod; without DSH_KUBE_POD it is refused with the sentence it gives.
func TestKubernetesComposition(t *testing.T) {
	needKubetest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := kubetest.New(t)
	srv.KeepExecsOnDisconnect(true) // as container runtimes do: the session's end is the relay's work
	if _, err := srv.AddPod("dev", map[string]string{"app": "dev"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(testplugins.Root(), "compositions", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "dsh"), "validate", writeComp(t, string(b))).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "set DSH_KUBE_POD to the pod the commands run in") {
		t.Fatalf("validate without DSH_KUBE_POD: %v\n%s", err, out)
	}

	s := startServeIn(t, ctx, t.TempDir(), string(b), "KUBECONFIG="+srv.Kubeconfig, "DSH_KUBE_POD=dev")
	text, _ := s.bash(t, ctx, map[string]any{"command": "echo \"[$(cat /proc/sys/kernel/hostname)|$DSH_COMPOSITION]\"; exit 4"})
	if !strings.Contains(text, "[dev|kubernetes]") || !strings.Contains(text, "[exit code: 4]") {
		t.Fatalf("bash in the pod: %q", text)
	}
	id := openTerm(t, ctx, s.cs)
	text = sendTerm(t, ctx, s.cs, map[string]any{"session_id": id, "text": `echo "<$(cat /proc/sys/kernel/hostname)>"`, "waitMs": 10000})
	expect(t, "a terminal in the pod", text, "\n<dev>\n")
}

// toolText is a call's text, or its error's.
func toolText(r *mcp.CallToolResult, err error) string {
	if err != nil {
		return "call failed: " + err.Error()
	}
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}
