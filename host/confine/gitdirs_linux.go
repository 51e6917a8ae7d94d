package confine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The git layer. git runs what a repository's own files say: hooks, and
// commands its configuration names (core.fsmonitor, core.hooksPath,
// filters, aliases, core.sshCommand…). A command that could write them
// inside the sandbox would run later outside it, at the user's next `git
// status`. So every git directory under a writable root is found (the
// top level's, nested repositories', submodules' under modules/, linked
// worktrees' under worktrees/, bare ones, the ones `.git` files and
// commondir point to) and its gitControl entries are kept read-only like the policy's
// protected paths, with each `.git` file (a submodule's or worktree's
// pointer) itself.
//
// What no mount can stop is a new file in a writable folder: a new `.git`
// (directory, or file pointing elsewhere), a control entry that did not
// exist (commondir, config.worktree), a module or worktree git directory,
// a protected path that did not exist (.envrc). A guard watches the
// writable roots (inotify on each folder, so nothing is walked per
// command) and, once a confined command has ended, removes what of that
// it created (Settle), and says so.

// gitControl are the entries of a git directory git reads as code or
// configuration (gitrepository-layout(5)): config and config.worktree
// (its own commands), commondir (another directory's config and hooks),
// hooks, and info/ (attributes pick the diff, merge and filter drivers
// configured elsewhere, exclude hides files from `git status`, grafts and
// sparse-checkout change what git shows). index, objects, refs, logs and
// HEAD stay writable: commits, branches, fetch, checkout, stash and
// rebase write there. objects/info/alternates is left writable too: it
// lends objects, which the command can write anyway.
var gitControl = []string{"config", "config.worktree", "commondir", "hooks", "info"}

// worktreeControl is what a linked worktree's git directory adds: gitdir
// says where its work tree is, which `git worktree remove` deletes.
var worktreeControl = []string{"gitdir"}

// undone is one path a confined command created that it may not have.
type undone struct {
	path, why string
	seq       uint64
}

// guard watches the writable roots of one policy for git directories and
// protected paths. One is made per set of writable roots and protected
// paths, on the first Wrap that needs it; the walk that finds what exists
// is paid once there.
type guard struct {
	roots     []string
	protected map[string]bool // the policy's protected paths inside the roots
	present   map[string]bool // those of them seen existing

	mu      sync.Mutex
	fd      int               // inotify; -1 once it failed (then every settle walks)
	dirs    map[int32]string  // watched folders by watch descriptor
	gitDirs map[string]string // known git directories: "" or "worktree"
	gitRole map[string]string // folders inside a git directory that hold git directories: "modules" or "worktrees"
	files   map[string]bool   // known .git files
	gen     uint64            // changes with the known set
	kept    []string          // paths(), as of keptGen
	keptGen uint64
	seq     uint64         // counts what was seen
	seen    []undone       // what appeared, newest last, kept while a command may own it
	marks   map[uint64]int // the marks of commands not settled yet
	closed  bool
}

// newGuard walks roots once, watching every folder, and learns the git
// directories there.
func newGuard(roots, protected []string) *guard {
	g := &guard{
		roots: slices.Clone(roots), protected: map[string]bool{}, present: map[string]bool{},
		dirs: map[int32]string{}, gitDirs: map[string]string{}, gitRole: map[string]string{},
		files: map[string]bool{}, marks: map[uint64]int{},
	}
	for _, p := range protected {
		if g.inRoots(p) {
			g.protected[p] = true
		}
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		fd = -1
	}
	g.fd = fd
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.roots {
		g.walk(r, false)
	}
	return g
}

func (g *guard) inRoots(path string) bool { return under(g.roots, path) }

// watchMask: entries made in the folder, or moved into it.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

func (g *guard) watch(dir string) {
	if g.fd < 0 {
		return
	}
	wd, err := unix.InotifyAddWatch(g.fd, dir, watchMask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) {
			// The watch limit (fs.inotify.max_user_watches): every settle
			// walks the roots instead.
			unix.Close(g.fd)
			g.fd = -1
		}
		return
	}
	g.dirs[int32(wd)] = dir // a folder moved keeps its descriptor: the path follows
}

// walk watches dir and what is under it, learning the git directories and
// .git files; with report, what it finds is what a command may have made.
func (g *guard) walk(dir string, report bool) {
	g.watch(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	if gitLayout(ents) {
		// A bare repository (a module cache's, a fixture): git reads its
		// config and hooks as it would a .git's.
		if _, known := g.gitDirs[dir]; !known {
			g.saw(dir, "a new bare git directory", report)
		}
		g.learnGitDir(dir, "", report)
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		// A walk may go over what was there before (a lost event, no
		// watch): only what was not is new.
		switch {
		case e.Name() == ".git":
			if _, known := g.gitDirs[p]; !known && !g.files[p] {
				g.saw(p, "a new .git", report)
			}
			g.learnGit(p, report)
		case g.protected[p]:
			if !g.present[p] {
				g.saw(p, "a protected path that did not exist", report)
			}
			g.present[p] = true
		case e.IsDir():
			g.walk(p, report)
		}
	}
}

// walkAll walks the roots for what appeared unseen (events lost, or no
// watch): new .git entries and protected paths, and in the git
// directories known, control entries and module or worktree folders
// that were not there.
func (g *guard) walkAll() {
	for _, r := range g.roots {
		g.walk(r, true)
	}
	for gd, role := range g.gitDirs {
		names := gitControl
		if role == "worktree" {
			names = slices.Concat(gitControl, worktreeControl)
		}
		for _, n := range names {
			p := filepath.Join(gd, n)
			if _, err := os.Lstat(p); err == nil && !g.present[p] {
				g.saw(p, "a git directory's "+n+" that did not exist", true)
			}
		}
		for _, held := range []string{"modules", "worktrees"} {
			g.walkHeldAgain(filepath.Join(gd, held), held)
		}
	}
}

// walkHeldAgain finds the module or worktree folders that were not there.
func (g *guard) walkHeldAgain(dir, held string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	g.watch(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if _, known := g.gitDirs[p]; known || !e.IsDir() {
			continue
		}
		if !g.present[p] {
			g.walkHeld(dir, held, true)
			return
		}
		g.walkHeldAgain(p, held)
	}
}

// saw records path as new.
func (g *guard) saw(path, why string, report bool) {
	if !report {
		return
	}
	g.seq++
	g.seen = append(g.seen, undone{path: path, why: why, seq: g.seq})
	if len(g.seen) > 4096 {
		g.seen = slices.Delete(g.seen, 0, len(g.seen)-4096)
	}
}

// learnGit learns the git directory a .git entry is or points to.
func (g *guard) learnGit(p string, report bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return
	}
	switch {
	case fi.IsDir():
		g.learnGitDir(p, "", report)
	case fi.Mode().IsRegular():
		g.files[p] = true
		g.gen++
		if target := gitFileTarget(p); target != "" {
			role := ""
			if filepath.Base(filepath.Dir(target)) == "worktrees" {
				role = "worktree" // however the walk came to it first
			}
			g.learnGitDir(target, role, report)
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		if real, err := filepath.EvalSymlinks(p); err == nil {
			g.learnGitDir(real, "", report)
		}
	}
}

// gitFileTarget is the git directory a .git file names ("gitdir: X",
// relative to the file's folder), if it is a folder.
func gitFileTarget(p string) string {
	b, err := os.ReadFile(p)
	if err != nil || len(b) > 4096 {
		return ""
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("gitdir:"))
	if !ok {
		return ""
	}
	target := string(bytes.TrimSpace(rest))
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(p), target)
	}
	if real, err := filepath.EvalSymlinks(target); err == nil {
		target = real
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		return ""
	}
	return filepath.Clean(target)
}

// learnGitDir learns gd, a git directory, with the ones it holds (modules,
// worktrees) and the one its commondir names. Outside the roots it is
// read-only already.
func (g *guard) learnGitDir(gd, role string, report bool) {
	if !g.inRoots(gd) {
		return
	}
	if was, ok := g.gitDirs[gd]; ok {
		if role == "worktree" && was != role {
			g.gitDirs[gd] = role
			g.gen++
		}
		return
	}
	g.gitDirs[gd] = role
	g.gen++
	g.watch(gd)
	for _, n := range slices.Concat(gitControl, worktreeControl) {
		if _, err := os.Lstat(filepath.Join(gd, n)); err == nil {
			g.present[filepath.Join(gd, n)] = true
		}
	}
	for _, held := range []string{"modules", "worktrees"} {
		d := filepath.Join(gd, held)
		g.gitRole[d] = held
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			g.walkHeld(d, held, report)
		}
	}
	if c := readCommondir(gd); c != "" {
		g.learnGitDir(c, "", report)
	}
}

// walkHeld watches a modules or worktrees folder and learns the git
// directories in it (module names may hold slashes: modules/a/b).
func (g *guard) walkHeld(dir, held string, report bool) {
	g.gitRole[dir] = held
	g.watch(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if !g.present[p] {
			g.saw(p, "a new "+strings.TrimSuffix(held, "s")+" git directory", report)
		}
		g.present[p] = true
		switch {
		case held == "worktrees":
			g.learnGitDir(p, "worktree", report)
		case isGitDir(p):
			g.learnGitDir(p, "", report)
		default:
			g.walkHeld(p, held, report)
		}
	}
}

// gitLayout says whether a folder's entries are a git directory's: a
// HEAD file beside objects and refs folders.
func gitLayout(ents []os.DirEntry) bool {
	n := 0
	for _, e := range ents {
		switch e.Name() {
		case "HEAD":
			if e.Type().IsRegular() {
				n++
			}
		case "objects", "refs":
			if e.IsDir() {
				n++
			}
		}
	}
	return n == 3
}

// isGitDir: git's own test, a HEAD beside objects and refs.
func isGitDir(p string) bool {
	for _, n := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Lstat(filepath.Join(p, n)); err != nil {
			return false
		}
	}
	return true
}

func readCommondir(gd string) string {
	b, err := os.ReadFile(filepath.Join(gd, "commondir"))
	if err != nil || len(b) > 4096 {
		return ""
	}
	c := strings.TrimSpace(string(b))
	if c == "" {
		return ""
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(gd, c)
	}
	if real, err := filepath.EvalSymlinks(c); err == nil {
		c = real
	}
	if fi, err := os.Stat(c); err != nil || !fi.IsDir() {
		return ""
	}
	return filepath.Clean(c)
}

// drain reads the events so far and learns from them; the lock is held.
func (g *guard) drain() {
	if g.fd < 0 {
		return
	}
	var buf [64 << 10]byte
	for {
		n, err := unix.Read(g.fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			name := string(bytes.TrimRight(nameBytes, "\x00"))
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				// Events were lost: what appeared is found by walking.
				g.walkAll()
				continue
			case ev.Mask&unix.IN_IGNORED != 0:
				delete(g.dirs, ev.Wd)
				continue
			}
			dir, ok := g.dirs[ev.Wd]
			if !ok || name == "" {
				continue
			}
			g.event(dir, name, ev.Mask&unix.IN_ISDIR != 0)
		}
	}
}

// event learns from an entry made in (or moved into) dir.
func (g *guard) event(dir, name string, isDir bool) {
	p := filepath.Join(dir, name)
	if role, ok := g.gitDirs[dir]; ok {
		if slices.Contains(gitControl, name) || (role == "worktree" && slices.Contains(worktreeControl, name)) {
			g.saw(p, "a git directory's "+name+" that did not exist", true)
			g.present[p] = true
			return
		}
		if held, ok := g.gitRole[p]; ok && isDir {
			g.walkHeld(p, held, true)
		}
		return
	}
	if held, ok := g.gitRole[dir]; ok {
		if isDir {
			g.saw(p, "a new "+strings.TrimSuffix(held, "s")+" git directory", true)
			g.present[p] = true
			if held == "worktrees" {
				g.learnGitDir(p, "worktree", true)
			} else {
				g.walkHeld(p, held, true)
			}
		}
		return
	}
	switch {
	case name == "HEAD" || name == "objects" || name == "refs":
		if _, known := g.gitDirs[dir]; !known && isGitDir(dir) {
			g.saw(dir, "a new bare git directory", true)
			g.learnGitDir(dir, "", true)
		} else if isDir {
			g.walk(p, true)
		}
	case name == ".git":
		g.saw(p, "a new .git", true)
		g.learnGit(p, true)
	case g.protected[p]:
		g.saw(p, "a protected path that did not exist", true)
		g.present[p] = true
	case isDir:
		// Made or moved in with what it holds: what got there before
		// the watch is found by the walk.
		g.walk(p, true)
	}
}

// paths are what the runners keep read-only, existing or not (one that
// appears later makes a prepared namespace stale), and gen the known
// set's version.
func (g *guard) paths() ([]string, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drain()
	if g.kept != nil && g.keptGen == g.gen {
		return g.kept, g.gen
	}
	var out []string
	for gd, role := range g.gitDirs {
		for _, n := range gitControl {
			out = append(out, g.keepable(filepath.Join(gd, n))...)
		}
		if role == "worktree" {
			for _, n := range worktreeControl {
				out = append(out, g.keepable(filepath.Join(gd, n))...)
			}
		}
	}
	for f := range g.files {
		out = append(out, g.keepable(f)...)
	}
	slices.Sort(out)
	// The list changes with the known set alone: a control entry that
	// appears is undone, one that exists cannot be replaced.
	g.kept, g.keptGen = slices.Compact(out), g.gen
	return g.kept, g.gen
}

// keepable is p as a runner can keep it: a symlink cannot be held in
// place (it is left out; the folder it names is kept instead when it is in
// a root).
func (g *guard) keepable(p string) []string {
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return []string{p}
	}
	if real, err := filepath.EvalSymlinks(p); err == nil && g.inRoots(real) {
		return []string{real}
	}
	return nil
}

// mark is where a command starts: what appears after it, until its
// settle, may be its.
func (g *guard) mark() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drain()
	g.marks[g.seq]++
	return g.seq
}

// settle removes what appeared since mark that still exists, and says
// what. Something the user made meanwhile outside the sandbox cannot be
// told apart: it goes too. With keep the command goes on (a terminal's
// shell): next is its mark from now, taken under the same lock, so
// nothing that appears in between escapes both.
func (g *guard) settle(mark uint64, keep bool) (out []undone, next uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, 0
	}
	if g.fd < 0 {
		g.walkAll()
	}
	g.drain()
	remove := func(u undone) {
		if slices.ContainsFunc(out, func(o undone) bool { return within(o.path, u.path) }) {
			return
		}
		if _, err := os.Lstat(u.path); err != nil {
			return
		}
		if err := removeBeneath(g.roots, u.path); err != nil {
			u.why += fmt.Sprintf(" (it could not be removed: %v)", err)
		}
		delete(g.present, u.path)
		out = append(out, u)
	}
	for _, u := range g.seen {
		if u.seq <= mark {
			continue
		}
		role, isGitDir := g.gitDirs[u.path]
		if fi, err := os.Lstat(u.path); err != nil || !fi.IsDir() || !isGitDir {
			if filepath.Base(u.path) == ".git" {
				g.forget(u.path) // a .git file or link goes whole
			}
			remove(u)
			continue
		}
		// A new git directory keeps its history (HEAD, objects, refs, the
		// index): what git would run from it goes.
		for _, n := range gitControl {
			remove(undone{path: filepath.Join(u.path, n), why: u.why + ": its " + n, seq: u.seq})
		}
		if role == "worktree" {
			for _, n := range worktreeControl {
				remove(undone{path: filepath.Join(u.path, n), why: u.why + ": its " + n, seq: u.seq})
			}
		}
	}
	if g.marks[mark]--; g.marks[mark] <= 0 {
		delete(g.marks, mark)
	}
	if keep {
		next = g.seq
		g.marks[next]++
	}
	// What no unsettled command may own is no longer needed.
	oldest := g.seq
	for m := range g.marks {
		oldest = min(oldest, m)
	}
	g.seen = slices.DeleteFunc(g.seen, func(u undone) bool { return u.seq <= oldest })
	return out, next
}

// forget drops what was learnt at or under p.
func (g *guard) forget(p string) {
	for gd := range g.gitDirs {
		if within(p, gd) {
			delete(g.gitDirs, gd)
			g.gen++
		}
	}
	for f := range g.files {
		if within(p, f) {
			delete(g.files, f)
			g.gen++
		}
	}
}

func (g *guard) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
	g.closed = true
}

// removeBeneath removes path (and what it holds) without following a
// symlink on the way: a command could have swapped a folder above it for
// one, to have something outside the roots removed.
func removeBeneath(roots []string, path string) error {
	root, ok := deepestRoot(roots, path)
	if !ok || path == root {
		return fmt.Errorf("%s is not inside a writable root", path)
	}
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rootfd)
	rel, _ := filepath.Rel(root, filepath.Dir(path))
	parent, err := unix.Openat2(rootfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return fmt.Errorf("its folder: %w", err)
	}
	defer unix.Close(parent)
	// The folder is held by its descriptor now; RemoveAll goes on from it
	// without following symlinks below.
	return os.RemoveAll(fmt.Sprintf("/proc/self/fd/%d/%s", parent, filepath.Base(path)))
}
