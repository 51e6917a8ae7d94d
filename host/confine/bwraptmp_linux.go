package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/dshrun/dsh/core/sandbox"
)

// bwrapTmp is the owner's private temporary folder under the bubblewrap
// runner (see Temps): its tmp bound on /tmp, its shm on /dev/shm, TMPDIR
// set to /tmp. The host's /tmp is then out of sight but for what is
// mounted on top at its path: the writable roots and hidden directories
// bwrap mounts later (it makes their mount points in the owner's tmp), and
// the unix sockets under /tmp the policy lets through, bound back.
type bwrapTmp struct {
	dir string // the owner's folder; "" when /tmp is the host's
	env bool   // TMPDIR is /tmp
}

// planBwrapTmp is the folder of opt under mode, with roots the writable
// roots that exist.
func planBwrapTmp(opt Options, mode string, roots []string) (bwrapTmp, error) {
	if opt.Tmp == "" || mode != sandbox.WorkspaceWrite {
		return bwrapTmp{}, nil
	}
	if slices.ContainsFunc(roots, func(r string) bool { return within(r, tmpDir) }) {
		return bwrapTmp{env: true}, nil // writable as the policy says
	}
	for _, sub := range []string{"tmp", "shm"} {
		if fi, err := os.Stat(filepath.Join(opt.Tmp, sub)); err != nil || !fi.IsDir() {
			return bwrapTmp{}, fmt.Errorf("temporary folder %s: its %s is not a directory", opt.Tmp, sub)
		}
	}
	return bwrapTmp{dir: opt.Tmp, env: true}, nil
}

// hidden reports whether path is out of sight behind the owner's /tmp.
func (t bwrapTmp) hidden(path string) bool { return t.dir != "" && within(tmpDir, path) }

// rootArgs mount the owner's tmp on /tmp, right over the host's root, and
// bind back the allowed sockets under /tmp outside the hidden
// directories (those are bound back with their directory).
func (t bwrapTmp) rootArgs(allowed, hides []string) []string {
	var args []string
	if t.env {
		args = append(args, "--setenv", "TMPDIR", tmpDir)
	}
	if t.dir == "" {
		return args
	}
	args = append(args, "--bind", filepath.Join(t.dir, "tmp"), tmpDir)
	for _, s := range allowed {
		if t.hidden(s) && !under(hides, s) {
			args = append(args, "--bind", s, s)
		}
	}
	return args
}

// hides are the hidden directories still to cover: one under the owner's
// /tmp is out of sight already, unless something in it is to be seen.
func (t bwrapTmp) hides(hides, shows, allowed []string) []string {
	return slices.DeleteFunc(hides, func(h string) bool {
		inside := func(s string) bool { return s != h && within(h, s) }
		return t.hidden(h) && !slices.ContainsFunc(shows, inside) && !slices.ContainsFunc(allowed, inside)
	})
}

// devArgs mount the owner's shm on /dev/shm (after --dev).
func (t bwrapTmp) devArgs() []string {
	if t.dir == "" {
		return nil
	}
	return []string{"--bind", filepath.Join(t.dir, "shm"), shmDir}
}
