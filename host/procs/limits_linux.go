package procs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/subprocess"
)

// Each command's tree gets limits on its tasks and its memory, from the
// pids and memory controllers of its cgroup. Where cgroup v2 has them (the
// manager's root cgroup lists them in cgroup.controllers: they are
// delegated to it) they are set on the tree's v2 cgroup itself. On hybrid
// hosts the controllers are bound to cgroup v1 hierarchies instead: each
// tree then also gets a cgroup in each of those, and since v1 has no
// CLONE_INTO_CGROUP the forking thread joins them for the fork (a child
// inherits the cgroups of the thread that forked it) and goes back right
// after: writing a thread id to a v1 `tasks` file moves that thread alone,
// about 35 µs for the four writes here, against ~1 ms for a spawn.

// Who enforces a controller.
const (
	byV2 = "cgroup v2"
	byV1 = "cgroup v1"
)

// limiter is a manager's side of the limits.
type limiter struct {
	pidsBy, memBy string // byV2, byV1 or "" (not enforced)
	// The manager's v1 roots, when a controller is enforced by v1; the
	// trees' v1 cgroups are made in them under the v2 child's name.
	pidsV1, memV1 string
	// home holds the host's own v1 cgroups' tasks files, open for
	// writing, for the forking thread to go back to.
	home []int
	def  Limits
	// noSwapFile is set when v1 memory has no memsw file (swap not
	// accounted), so swap cannot be capped with memory.
	noSwapFile bool
	status     LimitsStatus
}

// openLimits finds how limits can be enforced for root's trees and sets
// them up; it never fails: the status says what is not enforced and why.
func openLimits(root *cgroupRoot, name string, want Limits) *limiter {
	l := &limiter{}
	if root == nil {
		l.status = LimitsStatus{Reason: "no per-command cgroups"}
		return l
	}
	var why []string
	avail, _ := root.readFile("cgroup.controllers")
	v2 := strings.Fields(string(avail))
	var enable []string
	for _, c := range []string{"pids", "memory"} {
		if contains(v2, c) {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) > 0 {
		if err := os.WriteFile(filepath.Join(root.dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0); err != nil {
			why = append(why, fmt.Sprintf("cgroup v2 %s delegated but not enabled: %v", strings.Join(v2, ","), err))
		} else {
			for _, c := range enable {
				switch c {
				case "+pids":
					l.pidsBy = byV2
				case "+memory":
					l.memBy = byV2
				}
			}
		}
	}
	if l.pidsBy == "" {
		dir, home, err := v1Root("pids", name)
		if err != nil {
			why = append(why, "processes: "+err.Error())
		} else {
			l.pidsBy, l.pidsV1, l.home = byV1, dir, append(l.home, home)
		}
	}
	if l.memBy == "" {
		dir, home, err := v1Root("memory", name)
		if err != nil {
			why = append(why, "memory: "+err.Error())
		} else {
			l.memBy, l.memV1, l.home = byV1, dir, append(l.home, home)
			if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err != nil {
				l.noSwapFile = true
			}
		}
	}
	def := Limits{Processes: DefaultMaxProcesses, MemoryBytes: defaultMemory(root)}
	l.def = want.resolve(def)
	if l.pidsBy == "" {
		l.def.Processes = 0
	}
	if l.memBy == "" {
		l.def.MemoryBytes = 0
	}
	l.status = LimitsStatus{
		Available: l.pidsBy != "" || l.memBy != "",
		Processes: l.pidsBy,
		Memory:    l.memBy,
		Defaults:  l.def,
		Reason:    strings.Join(why, "; "),
	}
	return l
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// v1Root makes name in the host's own cgroup of the v1 hierarchy of
// controller, and opens the host's cgroup's tasks file.
func v1Root(controller, name string) (dir string, home int, err error) {
	mnt, mntRoot, err := findCgroup1(controller)
	if err != nil {
		return "", -1, err
	}
	own, err := ownCgroup1(controller)
	if err != nil {
		return "", -1, err
	}
	// Inside a container the mount shows a subtree: its root is what
	// /proc/self/cgroup names as mntRoot.
	if mntRoot != "/" {
		own = strings.TrimPrefix(own, mntRoot)
	}
	base := filepath.Join(mnt, own)
	removeStale(base)
	home, err = unix.Open(filepath.Join(base, "tasks"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("cgroup v1 %s: %w", base, err)
	}
	dir = filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		_ = unix.Close(home)
		return "", -1, fmt.Errorf("cgroup v1: %w", err)
	}
	return dir, home, nil
}

// removeStale removes the v1 cgroups a host that is gone left in base: the
// watchdog of a SIGKILLed host kills its trees and removes its cgroup v2
// directory, but knows nothing of these (empty once the trees are dead).
func removeStale(base string) {
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		var pid int
		var nonce int64
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "dsh-") {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "dsh-%d-%d", &pid, &nonce); err != nil || pid == os.Getpid() || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		dir := filepath.Join(base, e.Name())
		kids, _ := os.ReadDir(dir)
		for _, k := range kids {
			if k.IsDir() {
				_ = os.Remove(filepath.Join(dir, k.Name()))
			}
		}
		_ = os.Remove(dir)
	}
}

// mountinfo lists the mounts (a test hides the v1 hierarchies with
// another list).
var mountinfo = "/proc/self/mountinfo"

// findCgroup1 is the mount point of controller's v1 hierarchy and the
// cgroup it shows as its root.
func findCgroup1(controller string) (mnt, root string, err error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+3 < len(fields) && fields[i+1] == "cgroup" && len(fields) > 4 &&
				contains(strings.Split(fields[i+3], ","), controller) {
				return fields[4], fields[3], nil
			}
		}
	}
	return "", "", fmt.Errorf("no cgroup v1 %s hierarchy is mounted, and cgroup v2 has no %s controller delegated", controller, controller)
}

// ownCgroup1 is the host's cgroup in controller's v1 hierarchy.
func ownCgroup1(controller string) (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		// 8:pids:/some/path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && contains(strings.Split(parts[1], ","), controller) {
			return parts[2], nil
		}
	}
	return "", fmt.Errorf("the host is in no cgroup v1 %s hierarchy", controller)
}

// defaultMemory is DefaultMemoryShare of the memory the host may use: the
// machine's, or its own cgroup's limit where that is lower.
func defaultMemory(root *cgroupRoot) int64 {
	total := memTotal()
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(root.dir), "memory.max")); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && v < total {
			total = v
		}
	}
	if own, err := ownCgroup1("memory"); err == nil {
		if mnt, mntRoot, err := findCgroup1("memory"); err == nil {
			if mntRoot != "/" {
				own = strings.TrimPrefix(own, mntRoot)
			}
			if b, err := os.ReadFile(filepath.Join(mnt, own, "memory.limit_in_bytes")); err == nil {
				if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && v < total {
					total = v
				}
			}
		}
	}
	return total / DefaultMemoryShare &^ int64(os.Getpagesize()-1)
}

// memTotal is the machine's memory (MemTotal of /proc/meminfo).
func memTotal() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil && si.Totalram > 0 {
		return int64(si.Totalram) * int64(si.Unit)
	}
	return 8 << 30
}

// close removes the manager's v1 roots and what is left in them.
func (l *limiter) close() {
	for _, fd := range l.home {
		_ = unix.Close(fd)
	}
	l.home = nil
	for _, root := range []string{l.pidsV1, l.memV1} {
		if root == "" {
			continue
		}
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if e.IsDir() {
				removeDir(filepath.Join(root, e.Name()))
			}
		}
		removeDir(root)
	}
}

// v1group is one tree's cgroup in a v1 hierarchy.
type v1group struct {
	dir   string
	tasks int // its tasks file, open for writing
}

func newV1group(root, name string) (*v1group, error) {
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup v1: %w", err)
	}
	fd, err := unix.Open(filepath.Join(dir, "tasks"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		removeDir(dir)
		return nil, fmt.Errorf("cgroup v1: %w", err)
	}
	return &v1group{dir: dir, tasks: fd}, nil
}

func (g *v1group) remove() {
	if g == nil {
		return
	}
	if g.tasks >= 0 {
		_ = unix.Close(g.tasks)
		g.tasks = -1
	}
	removeDir(g.dir)
}

// treeLimits is a tree's side: its v1 cgroups, the limits set on it and
// the limits it hit.
type treeLimits struct {
	pids, mem *v1group
	set       Limits
	applied   bool // set holds what the files say
	hit       bool // a limit stopped something: never pooled
}

// addV1 makes the tree's v1 cgroups, named as its v2 one.
func (l *limiter) addV1(c *cgroup) error {
	name := filepath.Base(c.dir)
	var err error
	if l.pidsV1 != "" {
		if c.lim.pids, err = newV1group(l.pidsV1, name); err != nil {
			return err
		}
	}
	if l.memV1 != "" {
		if c.lim.mem, err = newV1group(l.memV1, name); err != nil {
			c.lim.pids.remove()
			c.lim.pids = nil
			return err
		}
	}
	return nil
}

// apply sets want (resolved: 0 is none) on the tree, writing only what
// differs from what is set.
func (l *limiter) apply(c *cgroup, want Limits) error {
	// The kernel keeps a memory limit in whole pages.
	want.MemoryBytes &^= int64(os.Getpagesize() - 1)
	if c.lim.applied && c.lim.set == want {
		return nil
	}
	num := func(v int64, none string) string {
		if v <= 0 {
			return none
		}
		return strconv.FormatInt(v, 10)
	}
	var err error
	write := func(dir, file, v string) {
		if err == nil {
			if e := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); e != nil {
				err = fmt.Errorf("set the limit %s=%s: %w", file, v, e)
			}
		}
	}
	switch l.pidsBy {
	case byV2:
		write(c.dir, "pids.max", num(want.Processes, "max"))
	case byV1:
		write(c.lim.pids.dir, "pids.max", num(want.Processes, "max"))
	}
	switch l.memBy {
	case byV2:
		write(c.dir, "memory.max", num(want.MemoryBytes, "max"))
		// Swap would stretch the limit: the tree gets none.
		if want.MemoryBytes > 0 {
			write(c.dir, "memory.swap.max", "0")
		} else {
			write(c.dir, "memory.swap.max", "max")
		}
	case byV1:
		v := num(want.MemoryBytes, "-1")
		if l.noSwapFile {
			write(c.lim.mem.dir, "memory.limit_in_bytes", v)
			break
		}
		// memsw (memory and swap) may never be below the memory limit:
		// lowering sets memory first, raising memsw first.
		if c.lim.applied && (want.MemoryBytes <= 0 || (c.lim.set.MemoryBytes > 0 && want.MemoryBytes > c.lim.set.MemoryBytes)) {
			write(c.lim.mem.dir, "memory.memsw.limit_in_bytes", v)
			write(c.lim.mem.dir, "memory.limit_in_bytes", v)
		} else {
			write(c.lim.mem.dir, "memory.limit_in_bytes", v)
			write(c.lim.mem.dir, "memory.memsw.limit_in_bytes", v)
		}
	}
	c.lim.applied = err == nil
	c.lim.set = want
	return err
}

// hits reads the tree's counters once it has ended: which limits stopped
// something in it.
func (l *limiter) hits(c *cgroup) []*subprocess.LimitHit {
	var out []*subprocess.LimitHit
	// Only a limit that is set can be hit.
	hit := func(limit string, value int64) {
		if value > 0 {
			out = append(out, &subprocess.LimitHit{Limit: limit, Value: value})
		}
	}
	switch l.pidsBy {
	case byV2:
		if counter(readIn(c.dir, "pids.events"), "max") > 0 {
			hit(LimitProcesses, c.lim.set.Processes)
		}
	case byV1:
		if counter(readIn(c.lim.pids.dir, "pids.events"), "max") > 0 {
			hit(LimitProcesses, c.lim.set.Processes)
		}
	}
	switch l.memBy {
	case byV2:
		// oom_kill counts any kill in the tree, the machine's OOM killer's
		// too; oom says it was this limit's.
		ev := readIn(c.dir, "memory.events")
		if counter(ev, "oom_kill") > 0 && counter(ev, "oom") > 0 {
			hit(LimitMemory, c.lim.set.MemoryBytes)
		}
	case byV1:
		// As for v2: the kill was this limit's when the tree's usage had
		// reached it (failcnt is not counted on recent kernels; the peak
		// stops short of the limit by at most a charge batch).
		dir := c.lim.mem.dir
		if counter(readIn(dir, "memory.oom_control"), "oom_kill") > 0 &&
			max(counter(readIn(dir, "memory.max_usage_in_bytes"), ""), counter(readIn(dir, "memory.memsw.max_usage_in_bytes"), ""))+1<<20 >= c.lim.set.MemoryBytes {
			hit(LimitMemory, c.lim.set.MemoryBytes)
		}
	}
	if len(out) > 0 {
		c.lim.hit = true
	}
	return out
}

// pristine reports whether the tree's limits are as set and its v1
// cgroups have no children.
func (l *limiter) pristine(c *cgroup) bool {
	if c.lim.hit || !c.lim.applied {
		return false
	}
	same := func(dir, file string, v int64, none string) bool {
		want := none
		if v > 0 {
			want = strconv.FormatInt(v, 10)
		}
		got := strings.TrimSpace(string(readIn(dir, file)))
		if none == "-1" && v <= 0 {
			// v1 reads "no limit" back as the largest page-aligned value.
			n, err := strconv.ParseInt(got, 10, 64)
			return err == nil && n >= 1<<62
		}
		return got == want
	}
	switch l.pidsBy {
	case byV2:
		if !same(c.dir, "pids.max", c.lim.set.Processes, "max") {
			return false
		}
	case byV1:
		if !same(c.lim.pids.dir, "pids.max", c.lim.set.Processes, "max") || subdirs(c.lim.pids.dir) {
			return false
		}
	}
	switch l.memBy {
	case byV2:
		if !same(c.dir, "memory.max", c.lim.set.MemoryBytes, "max") {
			return false
		}
	case byV1:
		if !same(c.lim.mem.dir, "memory.limit_in_bytes", c.lim.set.MemoryBytes, "-1") || subdirs(c.lim.mem.dir) {
			return false
		}
	}
	return true
}

// join is how the forking thread enters a tree's v1 cgroups for the fork,
// or nil when it has none.
func (l *limiter) join(c *cgroup) *v1join {
	// A hierarchy without a limit set need not be joined.
	j := &v1join{home: l.home}
	if c.lim.pids != nil && c.lim.set.Processes > 0 {
		j.into = append(j.into, c.lim.pids.tasks)
	}
	if c.lim.mem != nil && c.lim.set.MemoryBytes > 0 {
		j.into = append(j.into, c.lim.mem.tasks)
	}
	if len(j.into) == 0 {
		return nil
	}
	return j
}

// v1join moves the calling thread into v1 cgroups (enter) and back to the
// host's (leave), through tasks files opened beforehand: a confined
// thread may no longer open them.
type v1join struct{ into, home []int }

func (j *v1join) enter() error {
	tid := []byte(strconv.Itoa(unix.Gettid()))
	for _, fd := range j.into {
		if _, err := unix.Write(fd, tid); err != nil {
			j.leave()
			return fmt.Errorf("join the command's cgroup v1: %w", err)
		}
	}
	return nil
}

func (j *v1join) leave() {
	tid := []byte(strconv.Itoa(unix.Gettid()))
	for _, fd := range j.home {
		_, _ = unix.Write(fd, tid)
	}
}

// readIn reads a small control file by path ("" when it cannot).
func readIn(dir, name string) []byte {
	fd, err := unix.Open(filepath.Join(dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	buf := make([]byte, 512)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

// counter is the value of key in a "key value" file, or of a file holding
// one number when key is "".
func counter(b []byte, key string) int64 {
	if key == "" {
		n, _ := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		return n
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// subdirs reports whether dir has child directories (a cgroup file system
// directory counts them in its link count).
func subdirs(dir string) bool {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return true
	}
	return st.Nlink != 2
}
