package host

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Of go-plugin's sockets in the temporary directory, only those nothing
// is bound to go: a listening one stays, and so does one bound but not yet
// listening (it refuses connections as a dead one does).
func TestTmpSocketSweep(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	// dead: bound once, its process gone (the file stays).
	for _, name := range []string{"plugin1234567", "other1234567"} {
		l, err := net.Listen("unix", path(name))
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		_ = l.Close()
	}
	// Another user's, dead too: not ours to remove.
	theirs := os.Getuid() == 0 // only root can give a socket to another user
	if theirs {
		l, err := net.Listen("unix", path("plugin8888888"))
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		_ = l.Close()
		if err := os.Lchown(path("plugin8888888"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	live, err := net.Listen("unix", path("plugin7654321"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path("plugin5555555")}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("plugin42"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !connRefused(path("plugin5555555")) || !connRefused(path("plugin1234567")) {
		t.Fatal("a socket with no listener does not refuse connections: the test proves nothing")
	}

	sweepTmpSockets(dir)

	if _, err := os.Lstat(path("plugin1234567")); !os.IsNotExist(err) {
		t.Errorf("a dead go-plugin socket stays: %v", err)
	}
	kept := []string{"plugin7654321", "plugin5555555", "other1234567", "plugin42"}
	if theirs {
		kept = append(kept, "plugin8888888")
	}
	for _, kept := range kept {
		if _, err := os.Lstat(path(kept)); err != nil {
			t.Errorf("%s went: %v", kept, err)
		}
	}
	if c, err := net.Dial("unix", path("plugin7654321")); err != nil {
		t.Errorf("the live socket no longer answers: %v", err)
	} else {
		_ = c.Close()
	}
}
