//go:build linux

package procs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dshrun/dsh/host/credential"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the watchdog (see watchdog_test.go).
	if len(os.Args) == 3 && os.Args[1] == WatchdogArg {
		if err := RunWatchdog(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(SpawnerGoroutine))
}

func newManager(t *testing.T, environ ...string) *Manager {
	t.Helper()
	m, err := New(Config{
		SpillDir: filepath.Join(t.TempDir(), "spill"),
		Environ:  func() []string { return append([]string{"PATH=" + os.Getenv("PATH")}, environ...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

func bash(t *testing.T, m *Manager, script string, mod func(*Spec)) Result {
	t.Helper()
	spec := Spec{Argv: []string{"bash", "-c", script}, Dir: t.TempDir(), Owner: "test"}
	if mod != nil {
		mod(&spec)
	}
	p, err := m.Spawn(spec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%q did not finish", script)
	}
	return p.Result()
}

func TestExitCodes(t *testing.T) {
	m := newManager(t)
	r := bash(t, m, "echo hi", nil)
	if r.Status != Completed || r.ExitCode != 0 || string(r.Stdout.Data) != "hi\n" {
		t.Fatalf("echo: %+v", r)
	}
	r = bash(t, m, "echo oops >&2; exit 3", nil)
	if r.Status != Completed || r.ExitCode != 3 || string(r.Stderr.Data) != "oops\n" || r.TimedOut || r.Aborted {
		t.Fatalf("exit 3: %+v", r)
	}
	r = bash(t, m, "kill -SEGV $$", nil)
	if r.Status != Killed || r.Signal != "SIGSEGV" || r.ExitCode != -1 {
		t.Fatalf("signal: %+v", r)
	}
}

// A timeout kills the whole tree, setsid and double-forked children
// included, and says so.
func TestTimeoutKillsWholeTree(t *testing.T) {
	m := newManager(t)
	if !m.Cgroups() {
		t.Log("no cgroups here: testing the process-group fallback")
	}
	marker := fmt.Sprintf("%d", 900000+os.Getpid()%99999)
	script := fmt.Sprintf("sleep %s & setsid sleep %s & (setsid bash -c 'sleep %s' &) ; sleep %s", marker, marker, marker, marker)
	start := time.Now()
	r := bash(t, m, script, func(s *Spec) { s.Timeout = 300 * time.Millisecond; s.Grace = 200 * time.Millisecond })
	if !r.TimedOut || r.Aborted || r.Status != Killed || r.Signal == "" {
		t.Fatalf("result: %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	if left := testplugins.Matching(marker); len(left) > 0 {
		if !m.Cgroups() {
			t.Skipf("no writable cgroups here: setsid children escape a process group, as documented (%v)", left)
		}
		t.Fatalf("processes left behind: %v", left)
	}
}

func TestAbort(t *testing.T) {
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	r := bash(t, m, "sleep 30", func(s *Spec) { s.Abort = ctx; s.Timeout = time.Minute; s.Grace = 100 * time.Millisecond })
	if !r.Aborted || r.TimedOut || r.Status != Killed {
		t.Fatalf("result: %+v", r)
	}
}

// The first cause wins: an abort after the timeout fired is not an abort.
func TestFirstCauseWins(t *testing.T) {
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := bash(t, m, "trap '' TERM; sleep 30", func(s *Spec) {
		s.Abort = ctx
		s.Timeout = 100 * time.Millisecond
		s.Grace = 500 * time.Millisecond
	})
	cancel()
	if !r.TimedOut || r.Aborted {
		t.Fatalf("result: %+v", r)
	}
	if r.Signal != "SIGKILL" {
		t.Fatalf("a TERM-ignoring command must be SIGKILLed after the grace: %+v", r)
	}
}

// A background child holding stdout cannot keep the command from ending.
func TestLeftoverChildDoesNotHold(t *testing.T) {
	m := newManager(t)
	marker := fmt.Sprintf("%d", 800000+os.Getpid()%99999)
	start := time.Now()
	r := bash(t, m, "sleep "+marker+" & echo done", nil)
	if string(r.Stdout.Data) != "done\n" || r.ExitCode != 0 {
		t.Fatalf("result: %+v", r)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("took %v", d)
	}
	if left := testplugins.Matching(marker); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
}

// Withheld names and values reach no command; the names commands rely on
// (some of which look like credentials at a glance) reach them unchanged.
func TestEnvironmentScrub(t *testing.T) {
	m := newManager(t, "MY_API_KEY=k", "db_password=p", "GH_TOKEN=t", "CLIENT_SECRET=s", "DSH_AMBIENT=a", "PLAIN=ok",
		"MY_PASSWD=pw", "AWS_CREDENTIALS=c", "GIT_PRIVATE=x", "DATABASE_URL=postgres://user:password@db:5432/app",
		"GH_PAT=ghp", "GITHUB_PAT=ghp2", "MYSQL_PWD=my", "DB_PASS=dbp", "CI_JOB_JWT=jwt", "GIT_CREDS=gc", "NETLIFY_AUTH=na",
		"SENTRY_DSN=https://k3y@o0.ingest.sentry.io/1", "NOTIFY=https://hooks.slack.com/services/T000/B000/XXXX",
		"MIRROR=https://user@example.com", "SESSION_COOKIE=c",
		"OLDPWD=/", "GIT_AUTHOR_NAME=A U Thor", "GIT_AUTHOR_EMAIL=a@example.com", "COMPASS_HOME=/compass",
		"BYPASS_CACHE=1", "PUBLIC_URL=https://example.com/a@b")
	r := bash(t, m, "env", func(s *Spec) { s.Env = map[string]string{"DSH_HOME": "/h", "EXTRA": "e", "PLAIN": "over"} })
	env := string(r.Stdout.Data)
	for _, want := range []string{"DSH_HOME=/h", "EXTRA=e", "PLAIN=over", "PUBLIC_URL=https://example.com/a@b",
		"OLDPWD=/", "GIT_AUTHOR_NAME=A U Thor", "GIT_AUTHOR_EMAIL=a@example.com", "COMPASS_HOME=/compass", "BYPASS_CACHE=1"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, env)
		}
	}
	for _, bad := range []string{"MY_API_KEY", "db_password", "GH_TOKEN", "CLIENT_SECRET", "DSH_AMBIENT", "MY_PASSWD", "AWS_CREDENTIALS", "GIT_PRIVATE", "DATABASE_URL",
		"GH_PAT", "GITHUB_PAT", "MYSQL_PWD", "DB_PASS", "CI_JOB_JWT", "GIT_CREDS", "NETLIFY_AUTH", "SENTRY_DSN", "NOTIFY", "MIRROR", "SESSION_COOKIE"} {
		if strings.Contains(env, "\n"+bad+"=") || strings.HasPrefix(env, bad+"=") {
			t.Errorf("%s leaked into the environment", bad)
		}
	}
}

// The composition's additions: more name parts to withhold, exact names
// to pass on; DSH_* stays the trusted layer's alone.
func TestEnvironmentScrubExtraAndKeep(t *testing.T) {
	m, err := New(Config{
		SpillDir: filepath.Join(t.TempDir(), "spill"),
		Environ: func() []string {
			return []string{"PATH=" + os.Getenv("PATH"), "SENTRY_DSN=https://k@sentry.io/1", "Vault_Addr_Auth=a", "GPG_KEY_ID=ABC", "GH_TOKEN=t",
				"DSH_KEEP=x", "PROXY=http://u:p@proxy:3128", "PLAIN=ok"}
		},
		Scrub: credential.NewRule([]string{"dsn", "AUTH"}, []string{"GPG_KEY_ID", "PROXY", "DSH_KEEP"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer closeManager(t, m)
	env := strings.Join(m.Env(nil), "\n") + "\n"
	for _, want := range []string{"GPG_KEY_ID=ABC", "PROXY=http://u:p@proxy:3128", "PLAIN=ok"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, env)
		}
	}
	for _, bad := range []string{"SENTRY_DSN", "Vault_Addr_Auth", "GH_TOKEN", "DSH_KEEP"} {
		if strings.Contains(env, bad+"=") {
			t.Errorf("%s leaked into the environment", bad)
		}
	}
	// A real command sees the same.
	if r := bash(t, m, "echo ${GPG_KEY_ID:-unset} ${SENTRY_DSN:-unset}", nil); string(r.Stdout.Data) != "ABC unset\n" {
		t.Fatalf("command saw %q", r.Stdout.Data)
	}
}

func TestMinimalEnv(t *testing.T) {
	host := map[string]string{"HOME": "/root", "OPENAI_API_KEY": "sk", "LANG": "C", "TMPDIR": "/t", "RANDOM": "r"}
	env := MinimalEnv(func(k string) (string, bool) { v, ok := host[k]; return v, ok })
	if got := strings.Join(env, " "); got != "PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C TMPDIR=/t" {
		t.Fatalf("MinimalEnv = %q", got)
	}
}

func TestStdinAndTerminal(t *testing.T) {
	m := newManager(t)
	r := bash(t, m, "cat; echo end", nil)
	if string(r.Stdout.Data) != "end\n" {
		t.Fatalf("stdin not closed: %+v", r)
	}
	r = bash(t, m, "cat", func(s *Spec) { s.Stdin = []byte("given\n") })
	if string(r.Stdout.Data) != "given\n" {
		t.Fatalf("stdin: %q", r.Stdout.Data)
	}
	// No controlling terminal: opening /dev/tty fails.
	r = bash(t, m, "exec 3</dev/tty && echo has-tty || echo no-tty", nil)
	if !strings.Contains(string(r.Stdout.Data), "no-tty") {
		t.Fatalf("tty: %q", r.Stdout.Data)
	}
	// Its own session and process group.
	r = bash(t, m, "ps -o sid=,pgid= -p $$", nil)
	f := strings.Fields(string(r.Stdout.Data))
	if len(f) != 2 || f[0] != f[1] || f[0] == strconv.Itoa(os.Getpid()) {
		t.Fatalf("session/pgid: %q", r.Stdout.Data)
	}
}

func TestOutputRetentionAndSpill(t *testing.T) {
	m := newManager(t)
	r := bash(t, m, "head -c 200000 /dev/zero | tr '\\0' a; printf END", func(s *Spec) { s.MaxOutputBytes = 1000 })
	if len(r.Stdout.Data) != 1000 || !r.Stdout.Truncated || r.Stdout.Total != 200003 || r.Stdout.Dropped != 199003 {
		t.Fatalf("collected: len=%d %+v", len(r.Stdout.Data), r.Stdout)
	}
	if !bytes.HasSuffix(r.Stdout.Data, []byte("aaEND")) {
		t.Fatalf("want the tail, got ...%q", r.Stdout.Data[990:])
	}
	fi, err := os.Stat(r.Stdout.SpillPath)
	if err != nil || fi.Size() != 200003 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("spill %s: %v %v", r.Stdout.SpillPath, fi, err)
	}
	// Small output: no spill file at all.
	r = bash(t, m, "echo small", nil)
	if r.Stdout.SpillPath != "" || r.Stdout.Truncated {
		t.Fatalf("small output: %+v", r.Stdout)
	}
}

func TestSpillCap(t *testing.T) {
	m := newManager(t)
	r := bash(t, m, "head -c 20000 /dev/zero | tr '\\0' b", func(s *Spec) { s.MaxOutputBytes = 100; s.MaxSpillBytes = 5000 })
	b, err := os.ReadFile(r.Stdout.SpillPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, bytes.Repeat([]byte("b"), 5000)) || !strings.Contains(string(b[5000:]), "15000 more bytes were dropped") {
		t.Fatalf("spill file: %q", b[4990:])
	}
}

func TestBytesNotStrings(t *testing.T) {
	m := newManager(t)
	r := bash(t, m, `printf '\xff\xfeok'`, nil)
	if !bytes.Equal(r.Stdout.Data, []byte{0xff, 0xfe, 'o', 'k'}) {
		t.Fatalf("%q", r.Stdout.Data)
	}
}

// Consecutive reads never repeat and, within the memory bound, lose nothing.
func TestConsumingReads(t *testing.T) {
	m := newManager(t)
	p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", "for i in $(seq 1 20); do echo line$i; sleep 0.02; done"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	reads := 0
	for {
		r := p.Read()
		if r.Lossy {
			t.Fatalf("lossy read: %+v", r)
		}
		all.Write(r.Stdout.Data)
		reads++
		if r.Status != Running {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	all.Write(p.Read().Stdout.Data)
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if all.String() != want.String() || reads < 3 {
		t.Fatalf("after %d reads: %q", reads, all.String())
	}
}

func TestLossyRead(t *testing.T) {
	m := newManager(t)
	p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", "seq 1 5000"}, Dir: t.TempDir(), MaxOutputBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	r := p.Read()
	if !r.Lossy || r.Stdout.SpillPath == "" || !strings.HasSuffix(string(r.Stdout.Data), "4999\n5000\n") {
		t.Fatalf("read: %+v", r)
	}
	if r2 := p.Read(); r2.Lossy || len(r2.Stdout.Data) != 0 || r2.Status != Completed {
		t.Fatalf("second read: %+v", r2)
	}
}

func TestSpawnFailures(t *testing.T) {
	m := newManager(t)
	var se *Error
	_, err := m.Spawn(Spec{Argv: []string{"bash", "-c", "true"}, Dir: "/nonexistent/dir"})
	if !errors.As(err, &se) || se.Op != "workdir" {
		t.Fatalf("missing workdir: %v", err)
	}
	_, err = m.Spawn(Spec{Argv: []string{"no-such-program-xyz"}, Dir: t.TempDir()})
	if !errors.As(err, &se) || se.Op != "lookup" {
		t.Fatalf("missing program: %v", err)
	}
	// Each says what it could not use in a plain sentence that names it:
	// the model reads it as is.
	file := filepath.Join(t.TempDir(), "f")
	_ = os.WriteFile(file, nil, 0o600)
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Argv: []string{"bash"}, Dir: "/nonexistent/dir"}, "workdir /nonexistent/dir does not exist"},
		{Spec{Argv: []string{"bash"}, Dir: file}, "workdir " + file + " is not a directory"},
		{Spec{Argv: []string{"no-such-program-xyz"}, Dir: t.TempDir()}, "no-such-program-xyz is not installed (not found on PATH)"},
	} {
		if _, err := m.Spawn(c.spec); err == nil || err.Error() != c.want {
			t.Errorf("spawn %v in %s: %v, want %q", c.spec.Argv, c.spec.Dir, err, c.want)
		}
	}
}

func TestKillAndOwners(t *testing.T) {
	m := newManager(t)
	p, err := m.Spawn(Spec{Argv: []string{"sleep", "30"}, Dir: t.TempDir(), Owner: "a", Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Kill() {
		t.Fatal("Kill of a running process returned false")
	}
	bounded.Receive(t, p.Done(), "the process's end")
	if p.Kill() {
		t.Fatal("Kill of a finished process returned true")
	}
	if r := p.Result(); r.Status != Killed || r.Signal != "SIGTERM" || r.TimedOut || r.Aborted {
		t.Fatalf("killed: %+v", r)
	}
	if _, err := m.Get("b", p.ID); err == nil {
		t.Fatal("another owner got the process")
	}
	// Releasing an owner kills its processes and removes its spill files.
	q, _ := m.Spawn(Spec{Argv: []string{"bash", "-c", "seq 1 100000; sleep 30"}, Dir: t.TempDir(), Owner: "b", MaxOutputBytes: 10})
	time.Sleep(200 * time.Millisecond)
	spill := q.Read().Stdout.SpillPath
	if spill == "" {
		t.Fatal("no spill file")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.ReleaseOwner(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.Done():
	default:
		t.Fatal("owner's process survived its release")
	}
	if _, err := os.Stat(spill); !os.IsNotExist(err) {
		t.Fatalf("spill file survived: %v", err)
	}
}

// A cgroup is reused once its command has ended; a late signal meant for
// the old command must not reach the new one.
func TestReusedCgroupIsolatesLateSignals(t *testing.T) {
	m := newManager(t)
	if !m.Cgroups() {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	old, err := m.Spawn(Spec{Argv: []string{"true"}, Dir: t.TempDir(), Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, old.Done(), "the process's end")
	// The cgroup goes back to the pool just after Done.
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.cg.mu.Lock()
		idle := len(m.cg.idle)
		m.cg.mu.Unlock()
		if idle > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the finished command's cgroup never went back to the pool")
		}
		time.Sleep(time.Millisecond)
	}
	marker := "reuse-" + strconv.Itoa(os.Getpid())
	next, err := m.Spawn(Spec{Argv: []string{"bash", "-c", "exec -a " + marker + " sleep 30"}, Dir: t.TempDir(), Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if made := m.cg.made; made != 1 {
		t.Fatalf("%d cgroups made for two sequential commands, want 1 (reused)", made)
	}
	old.signalTree(syscall.SIGKILL)
	old.killTree()
	if old.Kill() {
		t.Error("Kill of a finished process returned true")
	}
	time.Sleep(50 * time.Millisecond)
	if st, _, _ := next.State(); st != Running || len(testplugins.Matching(marker)) == 0 {
		t.Fatalf("the new command died of signals meant for the old one: %v", st)
	}
	next.Kill()
	bounded.Receive(t, next.Done(), "the process's end")
	if r := next.Result(); r.Status != Killed {
		t.Fatalf("after Kill: %+v", r.Status)
	}
}

// A command pouring output gets its pipe grown and bigger reads; nothing
// is lost or counted twice on the way.
func TestPouringOutputExactCounts(t *testing.T) {
	m := newManager(t)
	const n = 48 << 20
	r := bash(t, m, fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; printf END", n), func(s *Spec) { s.MaxSpillBytes = 8 << 20 })
	if r.Stdout.Total != n+3 || r.Stdout.Dropped != n+3-DefaultMaxOutputBytes || !bytes.HasSuffix(r.Stdout.Data, []byte("xxEND")) {
		t.Fatalf("collected: total=%d dropped=%d tail=%q", r.Stdout.Total, r.Stdout.Dropped, r.Stdout.Data[len(r.Stdout.Data)-5:])
	}
	b, err := os.ReadFile(r.Stdout.SpillPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:8<<20], bytes.Repeat([]byte("x"), 8<<20)) ||
		!strings.Contains(string(b[8<<20:]), fmt.Sprintf("%d more bytes were dropped", n+3-(8<<20))) {
		t.Fatalf("spill file: %d bytes, ends %q", len(b), b[len(b)-120:])
	}
}

// A command may change its own cgroup (freeze it, say). Such a cgroup is
// not reused: the next command must not start frozen.
func TestChangedCgroupIsNotReused(t *testing.T) {
	m := newManager(t)
	if !m.Cgroups() {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	mnt, err := findCgroup2()
	if err != nil {
		t.Fatal(err)
	}
	r := bash(t, m, `echo 1 > "`+mnt+`$(grep '^0::' /proc/self/cgroup | cut -d: -f3)/cgroup.freeze"; sleep 100`,
		func(s *Spec) { s.Timeout = 300 * time.Millisecond; s.Grace = 100 * time.Millisecond })
	if !r.TimedOut || r.Status != Killed {
		t.Fatalf("frozen command: %+v", r)
	}
	time.Sleep(50 * time.Millisecond) // the cgroup is released just after Done
	done := make(chan Result, 1)
	go func() { done <- bash(t, m, "echo hello", func(s *Spec) { s.Timeout = 5 * time.Second }) }()
	select {
	case r := <-done:
		if string(r.Stdout.Data) != "hello\n" {
			t.Fatalf("after a frozen cgroup: %+v", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the next command hangs: it was started in the frozen cgroup")
	}
}

// A cgroup emptied with cgroup.kill stays poisonous on this kernel: a
// process started into it is SIGKILLed at birth. Every way a tree is killed
// (a leftover child, a timeout, a kill, an abort) must leave the next
// commands unharmed.
func TestKilledCgroupIsNotReused(t *testing.T) {
	m := newManager(t)
	if !m.Cgroups() {
		t.Skip("no writable cgroup v2 hierarchy")
	}
	ends := map[string]func(*Spec){
		"leftover child": nil,
		"timeout":        func(s *Spec) { s.Timeout = 200 * time.Millisecond; s.Grace = 50 * time.Millisecond },
	}
	check := func(after string) {
		t.Helper()
		for i := 0; i < 50; i++ {
			r := bash(t, m, "echo ok", nil)
			if r.Status != Completed || r.ExitCode != 0 || string(r.Stdout.Data) != "ok\n" {
				t.Fatalf("after %s, command %d: %+v", after, i, r)
			}
		}
	}
	for name, mod := range ends {
		script := "sleep 30 & echo started"
		if mod != nil {
			script = "sleep 30"
		}
		r := bash(t, m, script, mod)
		if name == "timeout" && !r.TimedOut {
			t.Fatalf("%s: %+v", name, r)
		}
		check(name)
	}
	// An explicit kill and an abort.
	for _, name := range []string{"kill", "abort"} {
		ctx, cancel := context.WithCancel(context.Background())
		p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", "sleep 30"}, Dir: t.TempDir(), Owner: "test", Abort: ctx, Grace: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if name == "kill" {
			p.kill(true)
		} else {
			cancel()
		}
		bounded.Receive(t, p.Done(), "the process's end")
		cancel()
		check(name)
	}
}

// A command that writes its own cgroup.kill poisons its cgroup too.
func TestSelfKilledCgroupIsNotReused(t *testing.T) {
	m := newManager(t)
	if !m.Cgroups() {
		t.Skip("no writable cgroup v2 hierarchy")
	}
	mnt, err := findCgroup2()
	if err != nil {
		t.Fatal(err)
	}
	r := bash(t, m, `echo 1 > "$MNT$(grep '^0::' /proc/self/cgroup | cut -d: -f3)/cgroup.kill"; sleep 5`,
		func(s *Spec) { s.Env = map[string]string{"MNT": mnt} })
	if r.Signal != "SIGKILL" {
		t.Fatalf("the command did not kill its own cgroup: %+v", r)
	}
	for i := 0; i < 20; i++ {
		if r := bash(t, m, "echo ok", nil); r.ExitCode != 0 || string(r.Stdout.Data) != "ok\n" {
			t.Fatalf("command %d after a self-kill: %+v", i, r)
		}
	}
}
