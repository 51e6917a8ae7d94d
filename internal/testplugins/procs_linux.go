package testplugins

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Running returns the pids of live processes whose executable is in dir.
// Tests use it to prove that nothing a composition started is left.
func Running(dir string) []int {
	dir, _ = filepath.EvalSymlinks(dir)
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		exe = strings.TrimSuffix(exe, " (deleted)")
		if filepath.Dir(exe) == dir && !zombie(pid) && ours(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// ours reports whether pid may be this process's doing: it descends from
// this process, or from no other test binary. A second `go test` of the
// same tree runs the same commands at the same moments, and its processes
// must not be counted here; an orphan (reparented to init by a leak) is
// counted, as it may be ours.
func ours(pid int) bool {
	self := os.Getpid()
	for range 64 {
		if pid == self {
			return true
		}
		if pid <= 1 {
			return true
		}
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && strings.HasSuffix(strings.TrimSuffix(exe, " (deleted)"), ".test") {
			return false // another test binary's
		}
		pid = parent(pid)
	}
	return true
}

// parent is pid's parent, 0 when it cannot be read.
func parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// Matching lists the live processes whose command line (arguments joined
// by spaces) contains marker, as "pid: cmdline".
func Matching(marker string) []string { return matching(marker, ours) }

func matching(marker string, ours func(pid int) bool) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if err == nil && strings.Contains(cmdline, marker) && !zombie(pid) && ours(pid) {
			out = append(out, e.Name()+": "+cmdline)
		}
	}
	return out
}

// Alive reports whether pid is a live process (not a zombie).
func Alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil && !zombie(pid)
}
