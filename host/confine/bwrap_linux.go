package confine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dshrun/dsh/core/sandbox"
)

// Bubblewrap is the bubblewrap runner: it wraps argv in a bwrap command line.
// It serves machines without what [Confinement] needs (Landlock ABI 5); the
// command is then started as usual (procs.Spec.Argv, no Confine), so
// the spawner's cgroup, timeout and kill hold the whole sandbox.
//
// Inside, the command sees the host's file system read-only (`--ro-bind /
// /`), with the mode's writable roots bound read-write over it, and:
//   - each existing protected path (the policy's, and Options.ReadOnly)
//     inside a writable root bound read-only over it, and every directory between the root and it bound onto
//     itself, so none of them can be removed or renamed away and replaced
//     (EBUSY: they are mount points);
//   - each Options.Hide directory covered by an empty read-only tmpfs, with
//     the Options.Show directories inside it bound back read-only;
//   - each unix socket bound at a path in the host's network namespace
//     (listed in /proc/net/unix) for at least socketSettle (10 s) when
//     Wrap runs covered by the null device on a nodev mount, so connect()
//     fails, unless Policy.UnixSockets names it or a directory above it
//     (one under a hidden directory is bound back in); each cover costs
//     bwrap about 0.15 ms. The Runner adds a seccomp filter refusing
//     socket(AF_UNIX) altogether, whatever a socket's age, when the policy
//     names none (socketRule, on the thread that forks bwrap);
//   - in workspace-write mode, the owner's temporary folder (Options.Tmp,
//     bwraptmp_linux.go) on /tmp and /dev/shm, TMPDIR=/tmp;
//   - a fresh /dev (null, zero, full, random, urandom, tty, a private pts
//     for PTYs) and a /proc of its own PID namespace: no other process can
//     be seen, signalled or read (/proc/PID/environ);
//   - no network but its own loopback (up) when the policy's network is
//     off, which also cuts off abstract unix sockets; for a proxied policy
//     under the Runner, a namespace the host made holding only its
//     loopback and the proxy's listeners (netbox.go);
//   - user, IPC (no SysV shared memory or semaphores of the host's), UTS
//     and cgroup namespaces of its own, no capabilities (the bounding set
//     empty too), no_new_privs, no further user namespaces, a new session
//     (no TIOCSTI into a caller's terminal), and SIGKILL when bwrap dies.
//
// What it does not block compared with [Confinement]:
//   - file systems mounted on the host while the command runs, under a
//     shared mount (systemd's default for /), appear inside writable:
//     bwrap's mounts receive the host's as slaves (Landlock's rules cover
//     new mounts too);
//   - /dev is a private writable tmpfs (gone with the command; Landlock
//     forbids writing there), and so is /dev/shm in read-only mode.
//
// What neither blocks: when the policy names unix sockets (so the Runner's
// filter is off), the others bound less than socketSettle before Wrap ran
// or after it, or by processes in another network namespace, and abstract
// ones with the network on; the whole network when the policy's network
// is on; writes through inherited descriptors; a protected path that does
// not exist yet being created (the Runner's guard undoes it once the
// command ended).
//
// Other differences: a command killed by a signal is reported as bwrap's
// exit code 128+signal, not as the signal; the command starts in the
// spawner's working directory if it can be seen inside, else in $HOME
// (bwrap's rule), so a working directory under a hidden one is not kept;
// a covered socket inside a writable root cannot be removed (EBUSY); a
// socket that goes away between Wrap and the start makes bwrap fail before
// the command runs (see Vanished) or, inside a writable root, leaves an
// empty file in its place. User namespaces are needed (FindBubblewrap
// says so when the kernel refuses them). Beyond the Runner's unix socket
// filter, no seccomp filter: without capabilities, mount, ptrace of
// others and the like fail anyway.
type Bubblewrap struct{ Path string } // the bwrap binary

// probeTimeout bounds FindBubblewrap's trial run.
const probeTimeout = 10 * time.Second

// FindBubblewrap finds bwrap on PATH and checks once that it can make the
// namespaces it needs here, by running `true` wrapped as Wrap wraps a
// read-only command; the error says why not.
func FindBubblewrap() (*Bubblewrap, error) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("bubblewrap is not installed (no bwrap on PATH; install the bubblewrap package): %w", err)
	}
	b := &Bubblewrap{Path: path}
	// A socket removed between the wrap and the run fails bwrap's set-up
	// (Vanished); that says nothing about bwrap, so it is tried again.
	for attempt := 1; ; attempt++ {
		argv, err := b.Wrap(&sandbox.Policy{DefaultMode: sandbox.ReadOnly}, sandbox.ReadOnly, Options{}, []string{"true"})
		if err != nil {
			return nil, err
		}
		stderr, err := probe(argv)
		if err == nil {
			break
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && b.Vanished(argv, ee.ExitCode(), stderr) && attempt < 3 {
			continue
		}
		why := strings.TrimSpace(string(stderr))
		if why == "" {
			why = "no message"
		}
		return nil, fmt.Errorf("bubblewrap (%s) cannot confine here (user, PID, network and mount namespaces are needed): %s: %w", path, why, err)
	}
	return b, nil
}

// probe runs argv from / with a bound on its time, and returns its stderr.
func probe(argv []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stderr.Bytes(), err
}

// Wrap returns the argv that runs argv confined under mode of p. opt.Hide
// are directories the command must not see (the host's runtime directory).
// Paths that do not exist are left out (a writable root, a protected path,
// a hidden directory); a relative one is an error.
//
// A proxied policy (network off, proxy rules) is wrapped with no network
// at all but its loopback, as without rules: its proxy's namespace is the
// Runner's to make and enter (bwrapNet).
func (b *Bubblewrap) Wrap(p *sandbox.Policy, mode string, opt Options, argv []string) ([]string, error) {
	return b.wrap(p, mode, opt, argv, false)
}

// wrap is Wrap; joined says that the thread that forks bwrap is in the
// proxied policy's namespace already (bwrapNet): bwrap then makes none,
// and the command gets the proxy's variables.
func (b *Bubblewrap) wrap(p *sandbox.Policy, mode string, opt Options, argv []string, joined bool) ([]string, error) {
	if b == nil || b.Path == "" {
		return nil, errors.New("no bwrap binary (FindBubblewrap finds one)")
	}
	if p == nil {
		return nil, errors.New("no sandbox policy to confine under")
	}
	if len(argv) == 0 {
		return nil, errors.New("nothing to run: empty argv")
	}
	var rootsIn []string
	switch mode {
	case sandbox.ReadOnly:
	case sandbox.WorkspaceWrite:
		if p.WorkspaceRoot == "" {
			return nil, errors.New("workspace-write without a workspace root")
		}
		rootsIn = slices.Concat([]string{p.WorkspaceRoot}, p.WritableRoots, p.CacheRoots)
	case sandbox.DangerFullAccess:
		return nil, errors.New("danger-full-access confines nothing: run it without a confinement")
	default:
		return nil, fmt.Errorf("unknown sandbox mode %q", mode)
	}
	roots, err := existing("writable root", rootsIn)
	if err != nil {
		return nil, err
	}
	// The host's read-only paths (its plugin binaries) are kept like the
	// policy's protected ones.
	protected, err := existing("protected path", slices.Concat(p.ProtectedPaths, opt.ReadOnly))
	if err != nil {
		return nil, err
	}
	hides, err := existing("hidden directory", opt.Hide)
	if err != nil {
		return nil, err
	}
	shows, err := existing("shown directory", opt.Show)
	if err != nil {
		return nil, err
	}
	allowed, err := existing("unix socket", p.UnixSockets)
	if err != nil {
		return nil, err
	}
	for _, h := range hides {
		if fi, err := os.Stat(h); err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("hidden directory %s is not a directory", h)
		}
	}
	// Fresh mounts replace /dev and /proc: nothing of the host's there.
	roots = slices.DeleteFunc(roots, fresh)
	hides = outermost(slices.DeleteFunc(hides, fresh))
	shows = outermost(shows)
	tmp, err := planBwrapTmp(opt, mode, roots)
	if err != nil {
		return nil, err
	}
	hides = tmp.hides(hides, shows, allowed)

	args := []string{b.Path,
		"--unshare-user", "--disable-userns",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
	}
	switch {
	case joined && proxied(p):
		for _, k := range slices.Sorted(maps.Keys(proxyEnv())) {
			args = append(args, "--setenv", k, proxyEnv()[k])
		}
	case !p.Network:
		args = append(args, "--unshare-net")
	}
	args = append(args, "--cap-drop", "ALL", "--new-session", "--die-with-parent",
		"--ro-bind", "/", "/")
	args = append(args, tmp.rootArgs(allowed, hides)...)
	// Parents before children: a later mount covers what an earlier one
	// put inside it.
	for _, r := range roots {
		args = append(args, "--bind", r, r)
	}
	var pins, ro []string
	for _, pp := range protected {
		root, ok := deepestRoot(roots, pp)
		if !ok {
			continue // read-only already
		}
		ro = append(ro, pp)
		// A directory that merely contains a mount can still be renamed
		// (the mount moves along) and a new one put in its place: each
		// directory between the root and the protected path is made a
		// mount point, which rename and rmdir refuse.
		for d := filepath.Dir(pp); d != root && within(root, d); d = filepath.Dir(d) {
			pins = append(pins, d)
		}
	}
	for _, d := range sortedSet(pins) {
		args = append(args, "--bind", d, d)
	}
	for _, pp := range sortedSet(ro) {
		args = append(args, "--ro-bind", pp, pp)
	}
	args = append(args, "--dev", "/dev", "--proc", "/proc")
	args = append(args, tmp.devArgs()...)
	for _, h := range hides {
		args = append(args, "--tmpfs", h)
		for _, s := range shows {
			if within(h, s) && s != h {
				args = append(args, "--ro-bind", s, s)
			}
		}
		for _, s := range allowed {
			if within(h, s) && s != h {
				args = append(args, "--bind", s, s)
			}
		}
		args = append(args, "--remount-ro", h)
	}
	sockets, _, err := coveredSockets(allowed)
	if err != nil {
		return nil, err
	}
	for _, s := range sockets {
		if under(hides, s) && !under(shows, s) {
			continue
		}
		// Behind the owner's /tmp, but for the writable roots and the
		// hidden directories showing something, bound back over it.
		if tmp.hidden(s) && !under(roots, s) && !under(hides, s) {
			continue
		}
		args = append(args, "--ro-bind", "/dev/null", s)
	}
	return append(append(args, "--"), argv...), nil
}

// Vanished reports whether a run of argv (made by Wrap) failed before the
// command started because a path it mounts went away in between, most
// often a unix socket removed by its owner: bwrap then exits 1 with one
// line naming that path. The command did not run; wrap it again (the
// socket is no longer listed) and rerun it.
func (b *Bubblewrap) Vanished(argv []string, exitCode int, stderr []byte) bool {
	line := strings.TrimSpace(string(stderr))
	if exitCode != 1 || !strings.HasPrefix(line, "bwrap: ") || strings.Contains(line, "\n") {
		return false
	}
	// Every path before "--" is a mount's source or destination.
	for _, a := range argv[min(1, len(argv)):] {
		if a == "--" {
			break
		}
		// bwrap names a mount's destination as it is outside, or inside
		// its new root (/newroot/...) once that is made.
		if strings.HasPrefix(a, "/") && (strings.Contains(line, " "+a+": ") || strings.Contains(line, " /newroot"+a+": ")) {
			return true
		}
	}
	return false
}

// existing resolves paths (absolute, symlinks resolved) and leaves out the
// ones that do not exist; what is what (kind) goes into the error.
func existing(kind string, paths []string) ([]string, error) {
	var out []string
	for _, path := range paths {
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("%s %q is not absolute", kind, path)
		}
		real, err := filepath.EvalSymlinks(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, path, err)
		}
		out = append(out, real)
	}
	return sortedSet(out), nil
}

// sortedSet sorts and dedupes: an ancestor sorts before what is under it.
func sortedSet(paths []string) []string {
	s := slices.Clone(paths)
	slices.Sort(s)
	return slices.Compact(s)
}

// within reports whether path is dir or under it.
func within(dir, path string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// fresh reports whether path is under the /dev or /proc made anew inside.
func fresh(path string) bool { return within("/dev", path) || within("/proc", path) }

// under reports whether path is one of dirs or under one.
func under(dirs []string, path string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return within(d, path) })
}

// deepestRoot is the innermost of roots that holds path.
func deepestRoot(roots []string, path string) (string, bool) {
	best, ok := "", false
	for _, r := range roots {
		if within(r, path) && len(r) >= len(best) {
			best, ok = r, true
		}
	}
	return best, ok
}

// outermost drops the sorted paths that lie under an earlier one: a
// directory inside a hidden one is hidden already (and no mount point can
// be made in the read-only tmpfs).
func outermost(sorted []string) []string {
	var out []string
	for _, p := range sorted {
		if len(out) == 0 || !within(out[len(out)-1], p) {
			out = append(out, p)
		}
	}
	return out
}
