package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// serveUntilReady starts exe serve file and returns the stderr lines up to
// 'ready'; the host is stopped at the test's end.
func serveUntilReady(t *testing.T, exe, file string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(exe, append(append([]string{"serve"}, args...), file)...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		stdin.Close()
		_ = cmd.Wait()
	})
	var lines []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "ready in") {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return lines
		}
	}
	t.Fatalf("%s serve never became ready:\n%s", exe, strings.Join(lines, "\n"))
	return nil
}

// waitMatching waits up to 10s for a live process whose command line holds
// marker.
func waitMatching(marker string) []string {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := testplugins.Matching(marker); len(m) > 0 || time.Now().After(deadline) {
			return m
		}
	}
}

// The host runs dsh_watchdog from its own folder; without one there it
// says so, naming the path, and runs dsh itself as the watchdog.
func TestWatchdogBinary(t *testing.T) {
	file := comp(t, "plugins:\n  - name: shell-env\n")
	serveUntilReady(t, filepath.Join(binDir, "dsh"), file)
	if len(waitMatching(filepath.Join(binDir, "dsh_watchdog")+" __watchdog ")) == 0 {
		if len(testplugins.Matching(" __watchdog ")) == 0 {
			t.Skip("no watchdog at all: no writable cgroups here")
		}
		t.Fatalf("no %s child: %v", "dsh_watchdog", testplugins.Matching(" __watchdog "))
	}

	alone := t.TempDir()
	b, err := os.ReadFile(filepath.Join(binDir, "dsh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alone, "dsh"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := serveUntilReady(t, filepath.Join(alone, "dsh"), file, "--plugin-path", binDir)
	want := filepath.Join(alone, "dsh_watchdog")
	warned := false
	for _, l := range lines {
		warned = warned || strings.Contains(l, "[WARN]") && strings.Contains(l, "watchdog binary is missing") && strings.Contains(l, want)
	}
	if !warned {
		t.Errorf("no warning naming %s:\n%s", want, strings.Join(lines, "\n"))
	}
	if len(waitMatching(filepath.Join(alone, "dsh")+" __watchdog ")) == 0 {
		t.Errorf("dsh itself is not the watchdog: %v", testplugins.Matching(" __watchdog "))
	}
}
