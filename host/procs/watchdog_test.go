//go:build linux

package procs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
)

// environOf reads a process's environment as the kernel shows it to
// anyone allowed to look.
func environOf(t *testing.T, pid int) []string {
	t.Helper()
	// A process reads as having no environment for a moment while it
	// execs: ask again until it has one.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			t.Fatalf("environ of %d: %v", pid, err)
		}
		if len(b) > 0 || time.Now().After(deadline) {
			return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		}
	}
}

// checkWatchdogEnv fails unless the watchdog's environment holds only the
// minimal names, none of the host's secrets.
func checkWatchdogEnv(t *testing.T, pid int, secrets ...string) {
	t.Helper()
	env := environOf(t, pid)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		allowed := false
		for _, n := range minimalNames {
			allowed = allowed || n == name
		}
		if !allowed {
			t.Errorf("the watchdog (pid %d) has %s, not one of the minimal names", pid, name)
		}
	}
	all := strings.Join(env, "\n")
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Errorf("the watchdog (pid %d) holds the host's secret %q", pid, s)
		}
	}
}

// The watchdog holds no secret of the host's; killed, it is back with a
// new pid, the host says so in its log, and the new one still guards the
// command trees.
func TestWatchdogEnvAndRestart(t *testing.T) {
	t.Setenv("DSH_TEST_API_TOKEN", "tok-never-in-the-watchdog")
	t.Setenv("TEST_DATABASE_URL", "postgres://app:pw-never-in-the-watchdog@db/app")
	t.Setenv("TEST_PLAIN_VAR", "plain-never-in-the-watchdog")
	secrets := []string{"tok-never-in-the-watchdog", "pw-never-in-the-watchdog", "plain-never-in-the-watchdog"}
	logs := &syncbuf.Buffer{}
	m, err := New(Config{
		SpillDir: filepath.Join(t.TempDir(), "spill"),
		Logger:   hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer closeManager(t, m)
	if !m.Cgroups() {
		t.Skip("no writable cgroups here: without them there is no watchdog")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.StartWatchdog(exe); err != nil {
		t.Fatal(err)
	}
	first := m.WatchdogPid()
	if first == 0 {
		t.Fatal("no watchdog pid")
	}
	checkWatchdogEnv(t, first, secrets...)

	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := 0
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if pid := m.WatchdogPid(); pid != 0 && pid != first && testplugins.Alive(pid) {
			second = pid
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new watchdog 30s after the first was killed (pid now %d)", m.WatchdogPid())
		}
	}
	checkWatchdogEnv(t, second, secrets...)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "[ERROR] the watchdog died"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the watchdog's death is not in the log:\n%s", logs)
		}
	}

	// The new watchdog does its job: when its pipe closes (as when the
	// host dies), the setsid child of a command is killed.
	marker := strconv.Itoa(310000 + os.Getpid()%99999)
	p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", fmt.Sprintf("setsid sleep %s & (setsid bash -c 'sleep %s' &); sleep %s", marker, marker, marker)}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(testplugins.Matching("sleep "+marker)) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's sleeps never started: %v", testplugins.Matching("sleep "+marker))
		}
	}
	m.watchdog.mu.Lock()
	_ = m.watchdog.pipe.Close()
	m.watchdog.mu.Unlock()
	for deadline, absent := time.Now().Add(30*time.Second), 0; absent < 3; time.Sleep(20 * time.Millisecond) {
		if len(testplugins.Matching("sleep "+marker)) == 0 {
			absent++
			continue
		}
		absent = 0
		if time.Now().After(deadline) {
			t.Fatalf("alive 30s after the watchdog's pipe closed: %v", testplugins.Matching("sleep "+marker))
		}
	}
	bounded.Receive(t, p.Done(), "the process's end")
}
