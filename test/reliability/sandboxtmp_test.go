//go:build linux

package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outsideTmp is a folder outside the host's /tmp, removed after the test:
// a confined command's /tmp is its owner's own, so a write under the
// host's /tmp lands there and is no write outside the workspace.
func outsideTmp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "dsh-outside-")
	if err != nil {
		t.Fatalf("a folder outside /tmp: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Two agents' sandboxed commands through dsh serve and the real plugins:
// each has a temporary folder of its own as /tmp and TMPDIR (mktemp and
// Python's tempfile work, a file stays for the agent's next command, the
// other agent sees none of it), a named cache root is writable and an
// unnamed one is not, and a bare repository made in it keeps its config;
// an agent's folder goes when its session ends, and
// the host leaves nothing in its temporary directory when it stops.
func TestSandboxTempFolders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The host's own TMPDIR, outside /tmp: its folders are hidden from
	// commands there too.
	// (The test's own temporary folders stay where they were: made once
	// before, under a short path, as sockets need.)
	_ = t.TempDir()
	hostTmp := outsideTmp(t)
	t.Setenv("TMPDIR", hostTmp)
	ws, other := outsideTmp(t), outsideTmp(t)
	named, unnamed := filepath.Join(other, "cache-a"), filepath.Join(other, "cache-b")
	if err := os.Mkdir(unnamed, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startHTTP(t, fmt.Sprintf(`sandbox:
  defaultMode: workspace-write
  workspaceRoot: %s
  cacheRoots: [%s]
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-sandbox
  - id: tools
    name: tool-bash
`, ws, named))
	base := filepath.Join(hostTmp, fmt.Sprintf("dsh-%d-tmp", os.Getuid()))
	a, b := s.connect(t, ctx), s.connect(t, ctx)
	bash := func(cs *mcp.ClientSession, command string) string {
		t.Helper()
		text, _ := callText(t, ctx, cs, "bash", map[string]any{"command": command, "workdir": ws})
		return text
	}

	f := fault(t, "sandbox: an agent's temporary folder")
	text := bash(a, `echo "tmpdir=$TMPDIR"; f=$(mktemp) && echo "mktemp=$f"; python3 -c 'import tempfile; print("python=" + tempfile.mkdtemp())'; echo secret > /tmp/x && cat /tmp/x`)
	for _, want := range []string{"tmpdir=/tmp", "mktemp=/tmp/tmp.", "python=/tmp/", "secret"} {
		if !strings.Contains(text, want) {
			t.Fatalf("temporary files: no %q in %q", want, text)
		}
	}
	folders, _ := filepath.Glob(filepath.Join(base, "host-*", "o*", "tmp", "x"))
	if len(folders) != 1 {
		t.Fatalf("the agent's folder on the host: %v", folders)
	}
	if text := bash(a, "cat /tmp/x"); text != "secret" {
		t.Fatalf("the agent's next command: %q", text)
	}
	text = bash(b, "cat /tmp/x; cat "+folders[0]+"; ls -A "+base+" | wc -l")
	// Neither cat finds the file; the host's folders are hidden (empty).
	if strings.Contains(text, "secret") || !strings.HasPrefix(text, "0\n") || strings.Count(text, "No such file or directory") != 2 {
		t.Fatalf("another agent reached the folder: %q", text)
	}
	f.Saw("own /tmp, kept across commands, unseen by the other agent")

	f = fault(t, "sandbox: cache roots")
	if text := bash(a, "echo c > "+filepath.Join(named, "f")+" && echo wrote"); text != "wrote" {
		t.Fatalf("a write to a named cache root: %q", text)
	}
	if text := bash(a, "echo c > "+filepath.Join(unnamed, "f")); !strings.Contains(text, "[sandbox: file access denied under workspace-write mode]") {
		t.Fatalf("a write to a folder not named: %q", text)
	}
	mustNotExist(t, "a write to a folder not named", filepath.Join(unnamed, "f"))
	// A bare repository made there, as go mod download makes one in
	// ~/go/pkg/mod/cache/vcs, keeps its config: cache roots are no git
	// guard's business.
	vcs := filepath.Join(named, "vcs", "0123abcd")
	if text := bash(a, "GIT_CONFIG_GLOBAL=/dev/null git init -q --bare "+vcs+" && echo made"); text != "made" {
		t.Fatalf("a bare repository in a cache root: %q", text)
	}
	if _, err := os.Stat(filepath.Join(vcs, "config")); err != nil {
		t.Fatalf("the bare repository in the cache root lost its config: %v", err)
	}
	f.Saw("named written, unnamed refused, a bare repository there kept whole")

	f = fault(t, "sandbox: an agent's folder when its session ends")
	_ = a.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(filepath.Dir(filepath.Dir(folders[0]))); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended session's folder is still there: %s", folders[0])
		}
	}
	if text := bash(b, "mktemp >/dev/null && echo b-ok"); text != "b-ok" {
		t.Fatalf("the other agent after the release: %q", text)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("dsh serve did not stop")
	}
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(hostTmp)
		t.Fatalf("the host left its temporary folders: %v %v", err, entries)
	}
	f.Saw("gone with the session, and with the host")
}
