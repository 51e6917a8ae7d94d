package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// Secrets in the host's environment, each with a value that must never be
// seen outside the host (the kept one excepted, and only by commands).
var hostSecrets = []string{
	"MY_PASSWD=pw-never-passed-1",
	"AWS_CREDENTIALS=cred-never-passed-2",
	"DATABASE_URL=postgres://user:password-never-passed-3@db:5432/app",
	"SENTRY_DSN=https://dsn-never-passed-4@sentry.example/1",
	"GH_TOKEN=tok-never-passed-5",
	"OPENAI_API_KEY=sk-never-passed-6",
}

func secretValues() []string {
	var out []string
	for _, kv := range hostSecrets {
		_, v, _ := strings.Cut(kv, "=")
		out = append(out, v)
	}
	return out
}

// The minimal environment of the host's own processes (plugins, watchdog).
var minimalNames = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "LANG": true, "LC_ALL": true, "LC_CTYPE": true,
	"LC_MESSAGES": true, "TZ": true, "TMPDIR": true, "DSH_HOME": true, "DSH_HOST_PID": true, "DSH_PLUGIN_ID": true,
}

func environOf(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return strings.ReplaceAll(string(b), "\x00", "\n"), err
}

// checkMinimalEnv fails unless pid's environment has only the minimal
// names and none of the values in leaks.
func checkMinimalEnv(t *testing.T, what string, pid int, leaks ...string) {
	t.Helper()
	env, err := environOf(pid)
	if err != nil {
		t.Fatalf("%s (pid %d): %v", what, pid, err)
	}
	for _, kv := range strings.Split(strings.TrimSpace(env), "\n") {
		if name, _, _ := strings.Cut(kv, "="); !minimalNames[name] {
			t.Errorf("%s (pid %d) has %s: not a minimal name", what, pid, name)
		}
	}
	for _, v := range leaks {
		if strings.Contains(env, v) {
			t.Errorf("%s (pid %d) holds %q", what, pid, v)
		}
	}
}

// children lists the live processes whose parent is pid, as pid -> command
// line.
func children(pid int) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out[c] = strings.ReplaceAll(string(cmdline), "\x00", " ")
	}
	return out
}

// watchdogOf is the pid of host's watchdog, waiting for one other than
// not to run; it fails the test after a generous deadline.
func watchdogOf(t *testing.T, host, not int) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for pid, cmd := range children(host) {
			if pid != not && strings.Contains(cmd, " __watchdog ") {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no watchdog (other than %d) under host %d after 30s: %v", not, host, children(host))
		}
	}
}

// waitAllGone waits until no process matches marker and none of pids
// lives, several polls in a row (exec briefly blanks a command line).
func waitAllGone(t *testing.T, marker string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for absent := 0; absent < 3; time.Sleep(20 * time.Millisecond) {
		left := testplugins.Matching(marker)
		for _, p := range pids {
			if testplugins.Alive(p) {
				left = append(left, fmt.Sprintf("%d (watchdog)", p))
			}
		}
		if len(left) == 0 {
			absent++
			continue
		}
		absent = 0
		if time.Now().After(deadline) {
			t.Fatalf("alive 60s after the host was killed: %v", left)
		}
	}
}

// A command kills the watchdog (it runs as the same user). The host starts
// a new one and says so; neither holds a secret of the host's; the session
// goes on; and a SIGKILL of the host still takes every command tree,
// setsid and double-forked children included, and the watchdog.
func TestWatchdogKilledByACommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	s := startServeIn(t, ctx, t.TempDir(), toolsComp, append(hostSecrets, "PLAIN_VAR=plain-never-in-the-watchdog")...)
	host := s.cmd.Process.Pid
	leaks := append(secretValues(), "plain-never-in-the-watchdog")

	f := fault(t, "watchdog: kill -9 by a command")
	first := watchdogOf(t, host, 0)
	checkMinimalEnv(t, "the watchdog", first, leaks...)
	if out, isErr := s.bash(t, ctx, map[string]any{"command": fmt.Sprintf("kill -9 %d && echo killed", first)}); out != "killed" || isErr {
		t.Fatalf("kill -9 of the watchdog: %q", out)
	}
	second := watchdogOf(t, host, first)
	f.Saw("watchdog %d killed, %d started", first, second)
	checkMinimalEnv(t, "the new watchdog", second, leaks...)
	f.Saw("both with the minimal environment")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if line := logLine(s.stderr.String(), "[ERROR]", "watchdog died"); line != "" {
			f.Saw("logged %q", line[strings.Index(line, "[ERROR]"):min(len(line), strings.Index(line, "[ERROR]")+60)])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watchdog's death is not in the host's log:\n%s", s.stderr)
		}
	}
	s.commandsRun(t, ctx, 10)
	f.Saw("10 later commands exit 0")

	g := fault(t, "watchdog: host SIGKILL after the watchdog was replaced")
	marker := strconv.Itoa(320000 + os.Getpid()%99999)
	script := fmt.Sprintf("sleep %s & setsid sleep %s & (setsid bash -c 'sleep %s' &); sleep %s", marker, marker, marker, marker)
	if out, _ := s.bash(t, ctx, map[string]any{"command": script, "run_in_background": true}); jobID(out) == "" {
		t.Fatalf("background start: %q", out)
	}
	fg := make(chan struct{})
	go func() {
		defer close(fg)
		_, _ = s.call(ctx, "bash", map[string]any{"command": "setsid sleep " + marker + " & sleep " + marker, "description": "fg"})
	}()
	for deadline := time.Now().Add(30 * time.Second); len(testplugins.Matching("sleep "+marker)) < 6; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the commands' sleeps never all started: %v", testplugins.Matching("sleep "+marker))
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitAllGone(t, "sleep "+marker, second)
	g.Saw("6 sleeps (setsid and double-forked among them) and the watchdog gone after the host's SIGKILL")
	receive(t, ctx, fg, "the call's end after the host's SIGKILL")
}

// logLine is the first line of log holding every one of words.
func logLine(log string, words ...string) string {
	for _, l := range strings.Split(log, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return l
		}
	}
	return ""
}

// Credentials in the host's environment, by name, by a URL's password, and
// by the composition's own additions, reach no command and no plugin; the
// name the composition keeps reaches commands.
func TestScrubbedEnvironment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := startServeIn(t, ctx, t.TempDir(), `
host:
  scrub:
    extra: [dsn]
    keep: [GPG_KEY_ID]
`+toolsComp, append(hostSecrets, "GPG_KEY_ID=kept-key-id", "PLAIN_VAR=plain-var")...)
	f := fault(t, "credentials in the host's environment")
	env, isErr := s.bash(t, ctx, map[string]any{"command": "env"})
	if isErr {
		t.Fatalf("env: %q", env)
	}
	for _, want := range []string{"GPG_KEY_ID=kept-key-id", "PLAIN_VAR=plain-var"} {
		if !strings.Contains("\n"+env+"\n", "\n"+want+"\n") {
			t.Errorf("a command lacks %s", want)
		}
	}
	for _, v := range secretValues() {
		if strings.Contains(env, v) {
			t.Errorf("a command sees %q", v)
		}
	}
	f.Saw("env of a command: none of %d credentials, GPG_KEY_ID kept", len(hostSecrets))
	plugins := 0
	for pid, cmd := range children(s.cmd.Process.Pid) {
		if strings.Contains(cmd, "__watchdog") || !strings.HasPrefix(filepath.Base(strings.Fields(cmd)[0]), "dsh-") {
			continue
		}
		// A plugin also gets the handshake's variables from go-plugin:
		// check that nothing of the host's beyond the minimal names is there.
		env, err := environOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range append(hostSecrets, "GPG_KEY_ID=kept-key-id", "PLAIN_VAR=plain-var") {
			name, value, _ := strings.Cut(kv, "=")
			if strings.Contains("\n"+env, "\n"+name+"=") || strings.Contains(env, value) {
				t.Errorf("plugin %s (pid %d) has %s", cmd, pid, name)
			}
		}
		plugins++
	}
	if plugins != 3 {
		t.Fatalf("%d plugin processes under the host, want 3: %v", plugins, children(s.cmd.Process.Pid))
	}
	f.Saw("%d plugins: none of the host's variables beyond the minimal ones", plugins)
	s.commandsRun(t, ctx, 5)
	f.Saw("5 later commands exit 0")
}

// host.scrub is checked like the rest of the file: an unknown key is
// refused with its file and line, and nothing starts.
func TestScrubSectionChecked(t *testing.T) {
	comp := writeComp(t, "host:\n  scrub:\n    extras: [dsn]\n    keep: [DSH_TOKEN]\n"+toolsComp)
	out, err := exec.Command(filepath.Join(binDir, "dsh"), "validate", comp).CombinedOutput()
	var ee *exec.ExitError
	if !errorAs(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	for _, want := range []string{comp + `:3:5: unknown host.scrub key "extras" (allowed: extra, keep)`, comp + `:4:12: host.scrub.keep: DSH_TOKEN is in the DSH_ namespace`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate says:\n%s\nwant %s", out, want)
		}
	}
}
