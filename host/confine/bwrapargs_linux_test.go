package confine

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
)

// Wrap refuses what it cannot confine, and says why.
func TestBubblewrapWrapErrors(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	p := &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: t.TempDir()}
	for _, c := range []struct {
		name string
		b    *Bubblewrap
		p    *sandbox.Policy
		mode string
		opt  Options
		argv []string
		want string
	}{
		{"danger-full-access", b, p, sandbox.DangerFullAccess, Options{}, []string{"true"}, "run it without a confinement"},
		{"an unknown mode", b, p, "yolo", Options{}, []string{"true"}, `unknown sandbox mode "yolo"`},
		{"no argv", b, p, sandbox.WorkspaceWrite, Options{}, nil, "empty argv"},
		{"no policy", b, nil, sandbox.WorkspaceWrite, Options{}, []string{"true"}, "no sandbox policy"},
		{"no binary", &Bubblewrap{}, p, sandbox.WorkspaceWrite, Options{}, []string{"true"}, "no bwrap binary"},
		{"a relative root", b, &sandbox.Policy{WorkspaceRoot: "ws"}, sandbox.WorkspaceWrite, Options{}, []string{"true"}, `writable root "ws" is not absolute`},
		{"no workspace root", b, &sandbox.Policy{}, sandbox.WorkspaceWrite, Options{}, []string{"true"}, "without a workspace root"},
		{"a hidden file", b, p, sandbox.ReadOnly, Options{Hide: []string{"/etc/passwd"}}, []string{"true"}, "/etc/passwd is not a directory"},
	} {
		_, err := c.b.Wrap(c.p, c.mode, c.opt, c.argv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// Wrap's mounts come in an order where none covers a later one, and leave
// out what does not exist or is covered already.
func TestBubblewrapWrapArgs(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"inner", "show/sub"} {
		if err := os.MkdirAll(filepath.Join(hidden, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{".git/hooks", "a/b", "bin"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".git/config", "bin/plugin"} {
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(ws, filepath.Join(hidden, "link")); err != nil {
		t.Fatal(err)
	}
	p := &sandbox.Policy{
		WorkspaceRoot: filepath.Join(hidden, "link"), // resolved to ws
		WritableRoots: []string{ws + "/a", "/nonexistent-root"},
		// The ones missing are left out: nothing to bind.
		ProtectedPaths: []string{ws + "/.git/hooks", ws + "/.git/config", ws + "/.claude", ws + "/a/b", "/etc/hostname"},
	}
	opt := Options{
		Hide:     []string{hidden, hidden + "/inner", "/nonexistent-hide"},
		Show:     []string{hidden + "/show/sub", hidden + "/show", "/nonexistent-show"},
		ReadOnly: []string{ws + "/bin/plugin"},
	}
	argv, err := b.Wrap(p, sandbox.WorkspaceWrite, opt, []string{"cmd", "--flag"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	sockets := got[strings.Index(got, "--remount-ro "+hidden)+len("--remount-ro "+hidden):]
	got = strings.TrimSuffix(got, sockets)
	want := "/usr/bin/bwrap --unshare-user --disable-userns --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try --unshare-net --cap-drop ALL --new-session --die-with-parent --ro-bind / /" +
		" --bind " + ws + " " + ws + " --bind " + ws + "/a " + ws + "/a" +
		" --bind " + ws + "/.git " + ws + "/.git --bind " + ws + "/bin " + ws + "/bin" +
		" --ro-bind " + ws + "/.git/config " + ws + "/.git/config --ro-bind " + ws + "/.git/hooks " + ws + "/.git/hooks --ro-bind " + ws + "/a/b " + ws + "/a/b" +
		" --ro-bind " + ws + "/bin/plugin " + ws + "/bin/plugin" +
		" --dev /dev --proc /proc --tmpfs " + hidden + " --ro-bind " + hidden + "/show " + hidden + "/show --remount-ro " + hidden
	if got != want {
		t.Errorf("argv\n%s\nwant\n%s", got, want)
	}
	if !strings.HasSuffix(sockets, " -- cmd --flag") {
		t.Errorf("argv does not end in the command: %q", sockets)
	}
	for _, f := range strings.Fields(strings.TrimSuffix(sockets, " -- cmd --flag")) {
		if f != "--ro-bind" && f != "/dev/null" && !strings.HasPrefix(f, "/") {
			t.Errorf("after the hidden directories, only socket covers: %q", sockets)
			break
		}
	}
}

// Vanished tells bwrap's failure to mount a path of the command line from
// the command's own failures.
func TestBubblewrapVanished(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	argv := []string{"/usr/bin/bwrap", "--ro-bind", "/", "/", "--ro-bind", "/dev/null", "/tmp/x/s.sock", "--", "cat", "/tmp/y"}
	for _, c := range []struct {
		exit   int
		stderr string
		want   bool
	}{
		{1, "bwrap: Can't create file at /tmp/x/s.sock: Read-only file system\n", true},
		{1, "bwrap: Can't mkdir parents for /tmp/x/s.sock: Read-only file system\n", true},
		// The path gone between bwrap's mkdir and its bind, as bwrap names
		// it inside its new root.
		{1, "bwrap: Can't bind mount /oldroot/dev/null on /newroot/tmp/x/s.sock: Unable to find \"/newroot/tmp/x/s.sock\" in mount table\n", true},
		{1, "bwrap: Can't find source path /tmp/y: No such file or directory\n", false}, // not a mount's
		{1, "cat: /tmp/x/s.sock: No such file or directory\n", false},
		{2, "bwrap: Can't create file at /tmp/x/s.sock: Read-only file system\n", false},
		{1, "bwrap: Can't create file at /tmp/x/s.sock: Read-only file system\nmore\n", false},
	} {
		if got := b.Vanished(argv, c.exit, []byte(c.stderr)); got != c.want {
			t.Errorf("Vanished(exit %d, %q) = %v, want %v", c.exit, c.stderr, got, c.want)
		}
	}
}

// The host's unix sockets are covered once settled, but not the allowed
// ones (named, or under a named directory) nor the ones a hidden directory
// hides already (unless a shown directory brings them back).
func TestBubblewrapSocketCovers(t *testing.T) {
	b := &Bubblewrap{Path: "/usr/bin/bwrap"}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"allowed", "hidden/shown"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	socks := map[string]string{} // name -> path
	for _, name := range []string{"covered.sock", "named.sock", "allowed/in-dir.sock", "hidden/hidden.sock", "hidden/shown/shown.sock"} {
		path := filepath.Join(dir, name)
		lis, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		socks[name] = path
	}
	p := &sandbox.Policy{UnixSockets: []string{socks["named.sock"], dir + "/allowed"}}
	opt := Options{Hide: []string{dir + "/hidden"}, Show: []string{dir + "/hidden/shown"}}
	// Sockets this new are not covered yet (they may be gone by the start).
	argv, err := b.Wrap(p, sandbox.ReadOnly, opt, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(argv, " "); strings.Contains(got, "/dev/null "+dir) {
		t.Errorf("sockets made just now are covered: %s", got)
	}
	coverYoungSockets(t)
	argv, err = b.Wrap(p, sandbox.ReadOnly, opt, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	for name, path := range socks {
		covered := strings.Contains(got, "--ro-bind /dev/null "+path+" ")
		if covered != (name == "covered.sock" || name == "hidden/shown/shown.sock") {
			t.Errorf("%s covered: %v, want %v (%s)", name, covered, !covered, got)
		}
	}
}

// FindBubblewrap says why it cannot use bwrap: not installed, or unable
// to confine here (bwrap's own message).
func TestFindBubblewrapSaysWhy(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := FindBubblewrap(); err == nil || !strings.Contains(err.Error(), "install the bubblewrap package") {
		t.Errorf("without bwrap: %v", err)
	}
	fake := "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBubblewrap(); err == nil || !strings.Contains(err.Error(), "cannot confine here") || !strings.Contains(err.Error(), "No permissions to create a new namespace") {
		t.Errorf("with a bwrap that cannot confine: %v", err)
	}
	// A mounted path that went away fails one try, not the finding.
	flaky := "#!/bin/sh\nif [ ! -e " + dir + "/tried ]; then : > " + dir + "/tried; echo \"bwrap: Can't create file at /proc: Read-only file system\" >&2; exit 1; fi\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(flaky), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBubblewrap(); err != nil {
		t.Errorf("with a bwrap that fails once on a vanished path: %v", err)
	}
}

func TestSocketPaths(t *testing.T) {
	in := `Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 960137 /run/a.sock
0000000000000000: 00000002 00000000 00010000 0001 01 960138 @abstract
0000000000000000: 00000003 00000000 00000000 0001 03  1583
0000000000000000: 00000002 00000000 00010000 0005 01 960139 /tmp/with space.sock
0000000000000000: 00000002 00000000 00010000 0005 01 960140 relative.sock
`
	got, err := socketPaths(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/run/a.sock", "/tmp/with space.sock"}; !slices.Equal(got, want) {
		t.Errorf("socketPaths = %q, want %q", got, want)
	}
}
