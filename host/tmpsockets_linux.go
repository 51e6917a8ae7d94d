package host

import (
	"bufio"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// go-plugin makes the host's own side of each plugin's broker a unix
// socket in the temporary directory (os.CreateTemp("", "plugin"): "plugin"
// and decimal digits), outside the runtime directory, and removes it only
// when the plugin is stopped: a host killed with SIGKILL leaves them
// behind. sweepTmpSockets removes such sockets that nothing serves any
// more. Another program using go-plugin names its sockets the same way;
// one with no socket bound to it is dead whoever made it.
func sweepTmpSockets(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var bound map[string]bool // read once, only if a candidate is found
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 || !isPluginSocketName(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			continue
		}
		if uid, ok := fileOwner(fi); !ok || uid != os.Getuid() {
			continue
		}
		if !connRefused(path) {
			continue
		}
		// A socket bound but not yet listening refuses too: the kernel's
		// table of bound sockets tells it from a dead one.
		if bound == nil {
			if bound = boundUnixSockets(); bound == nil {
				return // unreadable: nothing is certainly dead
			}
		}
		if !bound[path] {
			_ = os.Remove(path)
		}
	}
}

// isPluginSocketName reports whether name is one os.CreateTemp gives for
// the pattern "plugin".
func isPluginSocketName(name string) bool {
	digits, ok := strings.CutPrefix(name, "plugin")
	if !ok || digits == "" || len(digits) > 10 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// refused reports whether a connection to the socket at path is refused:
// no process listens on it. Anything else (it answers, it is slow, access
// is denied) counts as alive.
func connRefused(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// boundUnixSockets lists the paths of the unix sockets bound in this
// network namespace (/proc/net/unix: the rest of a line from its first
// "/", the last column, which may hold spaces), or nil when it cannot be
// read.
func boundUnixSockets() map[string]bool {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	bound := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if i := strings.Index(sc.Text(), " /"); i >= 0 {
			bound[sc.Text()[i+1:]] = true
		}
	}
	if sc.Err() != nil {
		return nil
	}
	return bound
}
