package procs

import (
	"time"

	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/subprocess"
)

// limitedManager is a manager whose commands are limited, or a skip where
// this host cannot limit them.
func limitedManager(t *testing.T) *Manager {
	t.Helper()
	m := newManager(t)
	st := m.Limits()
	if !st.Available || st.Processes == "" || st.Memory == "" {
		t.Skipf("no limits on this host: %s", st)
	}
	return m
}

// forkBomb starts sleeps until the shell cannot fork any more (dash stops
// at the first failed fork, where bash would retry for half a minute),
// printing how many it started.
const forkBomb = `i=0; while [ $i -lt 5000 ]; do sleep 30 & i=$((i+1)); echo $i; done`

// lastNumber is the last line of out, as a number.
func lastNumber(t *testing.T, out []byte) int {
	t.Helper()
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return 0
	}
	n, err := strconv.Atoi(lines[len(lines)-1])
	if err != nil {
		t.Fatalf("output %q does not end in a count", out)
	}
	return n
}

// hit reports whether hits say limit, set to value, stopped something.
func hit(hits []*subprocess.LimitHit, limit string, value int64) bool {
	return slices.ContainsFunc(hits, func(h *subprocess.LimitHit) bool { return h.Limit == limit && h.Value == value })
}

// A bounded fork bomb stops at the tree's process limit, the result says
// which limit and its value, and the next command runs.
func TestForkBombStopsAtTheProcessLimit(t *testing.T) {
	m := limitedManager(t)
	for _, confined := range []bool{false, true} {
		spec := func(s *Spec) {
			s.Argv = []string{"dash", "-c", forkBomb}
			s.Limits = Limits{Processes: 50}
			if confined {
				// The confined path forks from a thread of its own.
				s.Confine = func() error { return nil }
			}
		}
		r := bash(t, m, "", spec)
		started := lastNumber(t, r.Stdout.Data)
		if started >= 50 || started < 5 {
			t.Fatalf("confined %v: the fork bomb started %d sleeps under a limit of 50: %+v", confined, started, r)
		}
		if !hit(r.Limits, LimitProcesses, 50) {
			t.Fatalf("confined %v: the result does not say the process limit stopped the command: %+v (stderr %q)", confined, r.Limits, r.Stderr.Data)
		}
		next := bash(t, m, "echo next", nil)
		if next.Status != Completed || next.ExitCode != 0 || string(next.Stdout.Data) != "next\n" || len(next.Limits) != 0 {
			t.Fatalf("the command after the fork bomb: %+v", next)
		}
	}
}

// An allocation beyond the tree's memory limit is killed, the result says
// so, and the next command runs.
func TestAllocationBeyondTheMemoryLimitIsKilled(t *testing.T) {
	m := limitedManager(t)
	const limit = 64 << 20
	// tail holds a line without a newline whole: it grows to 200 MiB.
	r := bash(t, m, "set -o pipefail; head -c 200M /dev/zero | tail | wc -c", func(s *Spec) { s.Limits = Limits{MemoryBytes: limit} })
	if r.ExitCode == 0 || strings.TrimSpace(string(r.Stdout.Data)) == "209715200" {
		t.Fatalf("200 MiB were held under a limit of 64 MiB: %+v", r)
	}
	if !hit(r.Limits, LimitMemory, limit) {
		t.Fatalf("the result does not say the memory limit killed a process: %+v", r)
	}
	next := bash(t, m, "head -c 20M /dev/zero | tail | wc -c", func(s *Spec) { s.Limits = Limits{MemoryBytes: limit} })
	if next.Status != Completed || next.ExitCode != 0 || strings.TrimSpace(string(next.Stdout.Data)) != "20971520" || len(next.Limits) != 0 {
		t.Fatalf("the command after the allocation: %+v", next)
	}
}

// cgroupPaths are the cgroups a command ran in, by hierarchy ("pids",
// "memory", "" for v2), as it printed /proc/self/cgroup.
func cgroupPaths(out []byte) map[string]string {
	paths := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			paths[parts[1]] = parts[2]
		}
	}
	return paths
}

// A command under the defaults starts inside its limits (its processes are
// in the tree's cgroups from their first instruction, the host's threads
// are not), and a build-like load (a few hundred short processes, 300 MiB
// held at once) is not stopped.
func TestDefaultsLimitWithoutHinderingABuild(t *testing.T) {
	m := limitedManager(t)
	def := m.Limits().Defaults
	if def.Processes != DefaultMaxProcesses || def.MemoryBytes < 512<<20 {
		t.Fatalf("defaults %+v", def)
	}
	r := bash(t, m, `cat /proc/self/cgroup
for j in $(seq 8); do (for i in $(seq 20); do sh -c true; done) & done; wait
head -c 300M /dev/zero | tail | wc -c`, nil)
	if r.Status != Completed || r.ExitCode != 0 || len(r.Limits) != 0 || !strings.HasSuffix(string(r.Stdout.Data), "314572800\n") {
		t.Fatalf("a build-like load under the defaults: %+v (stderr %q)", r, r.Stderr.Data)
	}
	paths := cgroupPaths(r.Stdout.Data)
	for _, h := range []struct{ controller, file, want string }{
		{"pids", "pids.max", strconv.Itoa(DefaultMaxProcesses)},
		{"memory", "memory.limit_in_bytes", strconv.FormatInt(def.MemoryBytes&^4095, 10)},
	} {
		mnt, _, err := findCgroup1(h.controller)
		if err != nil {
			continue // enforced by v2
		}
		p := paths[h.controller]
		if !strings.Contains(p, "/dsh-") {
			t.Fatalf("the command ran in %s cgroup %q, not in one of the host's trees", h.controller, p)
		}
		b, err := os.ReadFile(filepath.Join(mnt, p, h.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != h.want {
			t.Fatalf("%s of the command's cgroup is %s, want %s", h.file, got, h.want)
		}
		// The host's own threads stay where they were.
		own, _ := ownCgroup1(h.controller)
		self, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/cgroup")
		if got := cgroupPaths(self)[h.controller]; got != own {
			t.Fatalf("the host's main thread is in %s cgroup %q, want %q", h.controller, got, own)
		}
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/cgroup")
			if got := cgroupPaths(b)[h.controller]; got != "" && got != own {
				t.Fatalf("host thread %s stayed in %s cgroup %q after the spawn", task.Name(), h.controller, got)
			}
		}
	}
}

// A tree's cgroups go back to the pool after an ordinary command, but not
// after one a limit stopped, even when the tree ended by itself (no kill
// poisoned it): the next command gets fresh ones.
func TestAStoppedTreeIsNotPooled(t *testing.T) {
	m := limitedManager(t)
	where := func(script string) (string, Result) {
		r := bash(t, m, "cat /proc/self/cgroup; "+script, func(s *Spec) { s.Limits = Limits{MemoryBytes: 64 << 20} })
		return cgroupPaths(r.Stdout.Data)["memory"], r
	}
	first, r := where("head -c 200M /dev/zero | tail | wc -c")
	if first == "" || len(r.Limits) == 0 || r.Signal != "" {
		t.Skipf("memory is not limited by cgroup v1 here: %+v", r)
	}
	second, _ := where("true")
	if second == first {
		t.Fatalf("the cgroup %s a limit stopped was pooled and reused", first)
	}
	// A tree's cgroup goes back to the pool just after its Run returns (on
	// a goroutine of its own): wait, bounded, until it is there.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m.cg.mu.Lock()
		back := len(m.cg.idle) > 0
		m.cg.mu.Unlock()
		if back {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cgroup %s was not given back within 10s", second)
		}
	}
	// No limit stopped that one: it is pooled.
	third, _ := where("true")
	if third != second {
		t.Fatalf("a cgroup no limit stopped was not reused: %s then %s", second, third)
	}
}

// Where neither cgroup v2 nor v1 has the controllers, the manager says so
// once in its log and in its status, and commands still run, unlimited.
func TestNoControllersSaysSoOnce(t *testing.T) {
	if _, err := findCgroup2(); err != nil {
		t.Skip("no cgroup v2 hierarchy here")
	}
	// The v1 hierarchies hidden: a mount list with cgroup v2 alone.
	list := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(list, []byte("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := mountinfo
	mountinfo = list
	defer func() { mountinfo = old }()
	var log strings.Builder
	m, err := New(Config{
		SpillDir: filepath.Join(t.TempDir(), "spill"),
		Logger:   hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Debug}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(t.Context())
	if !m.Cgroups() {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	st := m.Limits()
	if v2, _ := os.ReadFile(filepath.Join(m.cg.dir, "cgroup.controllers")); strings.Contains(string(v2), "pids") {
		t.Skipf("cgroup v2 has the controllers here: %s", st)
	}
	if st.Available || !strings.HasPrefix(st.String(), "unavailable (processes: no cgroup v1 pids hierarchy is mounted") {
		t.Fatalf("status %+v: %s", st, st)
	}
	if n := strings.Count(log.String(), "no limits on the processes and memory of commands"); n != 1 {
		t.Fatalf("%d warnings:\n%s", n, log.String())
	}
	r := bash(t, m, "echo ran", func(s *Spec) { s.Limits = Limits{Processes: 5} })
	if string(r.Stdout.Data) != "ran\n" || len(r.Limits) != 0 {
		t.Fatalf("%+v", r)
	}
}

// The status line names who enforces what, and the defaults.
func TestLimitsStatusLine(t *testing.T) {
	st := LimitsStatus{Available: true, Processes: "cgroup v1", Memory: "cgroup v2", Defaults: Limits{4096, 3 << 29}}
	if got := st.String(); got != "per command: 4096 processes by cgroup v1, 1.5 GiB of memory by cgroup v2" {
		t.Fatal(got)
	}
	st.Defaults.MemoryBytes = 0
	if got := st.String(); got != "per command: 4096 processes by cgroup v1, memory unlimited unless an executor sets a limit, by cgroup v2" {
		t.Fatal(got)
	}
	st = LimitsStatus{Reason: "no per-command cgroups"}
	if got := st.String(); got != "unavailable (no per-command cgroups)" {
		t.Fatal(got)
	}
}

// The v1 cgroups a SIGKILLed host left behind (its watchdog removes only
// the v2 ones) are removed by the next host that starts; a live host's are
// not touched.
func TestStaleV1CgroupsAreRemoved(t *testing.T) {
	mnt, root, err := findCgroup1("pids")
	if err != nil {
		t.Skip(err)
	}
	own, _ := ownCgroup1("pids")
	if root != "/" {
		own = strings.TrimPrefix(own, root)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(mnt, own, "dsh-"+strconv.Itoa(gone.Process.Pid)+"-1")
	live := filepath.Join(mnt, own, "dsh-"+strconv.Itoa(os.Getppid())+"-1")
	for _, d := range []string{stale, filepath.Join(stale, "c1"), live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Skip(err)
		}
	}
	defer os.Remove(live)
	defer os.Remove(filepath.Join(stale, "c1"))
	defer os.Remove(stale)
	limitedManager(t)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale %s is still there: %v", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a live host's %s was removed: %v", live, err)
	}
}
