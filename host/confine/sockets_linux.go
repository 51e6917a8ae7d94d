package confine

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The host's unix sockets at a path, which both runners cover when the
// policy names some: every socket bound in the host's network namespace
// is covered so connect() fails, but the named ones and those under a
// named directory. Covering is for a policy that names sockets: one that
// names none gets socket(AF_UNIX) refused altogether (seccomp).

// socketSettle is how long a socket must have existed to be covered. bwrap
// cannot mount over a path that is gone, and fails the whole start, so the
// sockets that come and go (test suites', go-plugin's brokers') are left
// alone; the services worth covering have been there longer.
var socketSettle = 10 * time.Second

// hostSockets are the unix sockets bound at a path in this network
// namespace (their paths as bound, resolved) that exist as sockets now:
// settled, those that have for socketSettle; young, the others.
func hostSockets() (settled, young []string, err error) {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil, nil, fmt.Errorf("the unix sockets to cover: %w", err)
	}
	defer f.Close()
	paths, err := socketPaths(f)
	if err != nil {
		return nil, nil, fmt.Errorf("the unix sockets to cover: /proc/net/unix: %w", err)
	}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue // gone, or not reachable by that name
		}
		fi, err := os.Stat(real)
		if err != nil || fi.Mode().Type() != fs.ModeSocket {
			continue
		}
		// The change time is the bind's (or a chmod right after it), and
		// no one can set it back.
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && time.Since(time.Unix(st.Ctim.Unix())) < socketSettle {
			young = append(young, real)
			continue
		}
		settled = append(settled, real)
	}
	return sortedSet(settled), sortedSet(young), nil
}

// socketPaths parses /proc/net/unix: "Num RefCount Protocol Flags Type St
// Inode Path", the path last and only for bound sockets; abstract ones
// start with "@" and are left out, as are relative paths.
func socketPaths(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for first := true; sc.Scan(); first = false {
		if first {
			continue // the header
		}
		line := sc.Text()
		// Skip the seven fixed fields; the path may hold spaces.
		rest := strings.TrimLeft(line, " ")
		for range 7 {
			i := strings.IndexByte(rest, ' ')
			if i < 0 {
				rest = ""
				break
			}
			rest = strings.TrimLeft(rest[i:], " ")
		}
		if strings.HasPrefix(rest, "/") {
			out = append(out, rest)
		}
	}
	return out, sc.Err()
}

// coveredSockets are the host's settled sockets (hostSockets) a policy
// naming allowed (resolved) does not let through: not one of them nor
// under one, and not under the /dev and /proc both runners make anew;
// young, the sockets that will be once settled.
func coveredSockets(allowed []string) (covered, young []string, err error) {
	settled, unsettled, err := hostSockets()
	if err != nil {
		return nil, nil, err
	}
	keep := func(s string) bool { return !fresh(s) && !under(allowed, s) }
	for _, s := range settled {
		if keep(s) {
			covered = append(covered, s)
		}
	}
	for _, s := range unsettled {
		if keep(s) {
			young = append(young, s)
		}
	}
	return covered, young, nil
}
