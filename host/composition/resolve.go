package composition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Resolve finds the binary of entry e and returns its absolute path. A path
// entry's binary is e.Path, relative to c.Dir unless absolute; a name entry's
// is e.BinaryName(), looked for in dirs in order, the first match winning
// (empty dirs are skipped). The binary must be a regular, executable file
// (symbolic links followed). The error is an *Error at e.Pos naming the
// entry, the binary and every place looked at.
func (c *Composition) Resolve(e Entry, dirs []string) (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", &Error{Pos: e.Pos, ID: e.ID, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case e.Path != "":
		p := filepath.FromSlash(e.Path)
		if !filepath.IsAbs(p) {
			p = filepath.Join(c.Dir, p)
		}
		if err := checkBinary(p); err != nil {
			return fail("binary %q (path %q, relative to %s): %v", e.BinaryName(), e.Path, c.Dir, err)
		}
		return absolute(p), nil
	case e.Name != "":
		bin := e.BinaryName()
		var searched, notes []string
		for _, dir := range dirs {
			if dir == "" {
				continue
			}
			searched = append(searched, dir)
			for _, cand := range candidates(filepath.Join(dir, bin)) {
				err := checkBinary(cand)
				if err == nil {
					return absolute(cand), nil
				}
				if err != errMissing {
					notes = append(notes, fmt.Sprintf("%s %v", cand, err))
				}
			}
		}
		if len(searched) == 0 {
			return fail("binary %q not found: no plugin directory to search", bin)
		}
		msg := fmt.Sprintf("binary %q not found; searched: %s", bin, strings.Join(searched, ", "))
		if len(notes) > 0 {
			msg += " (skipped: " + strings.Join(notes, "; ") + ")"
		}
		return fail("%s", msg)
	}
	return fail("the entry has neither name nor path")
}

// candidates are the file names a binary may have here.
func candidates(p string) []string {
	if runtime.GOOS == "windows" && !strings.EqualFold(filepath.Ext(p), ".exe") {
		return []string{p + ".exe", p}
	}
	return []string{p}
}

var errMissing = errors.New("does not exist")

// checkBinary reports why p is not a binary that can be run.
func checkBinary(p string) error {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errMissing
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	case fi.IsDir():
		return errors.New("is a directory")
	case !fi.Mode().IsRegular():
		return fmt.Errorf("is not a regular file (%s)", fi.Mode().Type())
	case runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("is not executable (mode %s)", fi.Mode().Perm())
	}
	return nil
}

func absolute(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
