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
		if filepath.Dir(exe) == dir && !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
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
func Matching(marker string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if err == nil && strings.Contains(cmdline, marker) && !zombie(pid) {
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
