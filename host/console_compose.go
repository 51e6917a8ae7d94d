package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/plan"
	"github.com/dshrun/dsh/host/pluginproc"
)

// Editing the composition from the console: the text is read as the file
// at its path would be, planned against the running host as an edit the
// watcher sees would be (every check, nothing applied), and only a text
// without problems is written (whole, in one rename) and applied. A text
// that fails to apply leaves the file as it was, and the running set
// stays as it was (applying is a transaction).

// Problem is one problem of a composition text, at its place.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

// CompositionText is the composition file as it is now on disk.
func (h *Host) CompositionText() (file string, text []byte, err error) {
	file = h.comp.File
	text, err = os.ReadFile(file)
	if err != nil {
		return file, nil, fmt.Errorf("reading the composition %s: %w", file, err)
	}
	return file, text, nil
}

// CheckCompositionText lists every problem text would meet as the
// composition file: parsing it, planning it against the running host (new
// or changed binaries are started to be described, then stopped), and the
// config checks of the plugins started. Nothing is applied or written.
func (h *Host) CheckCompositionText(ctx context.Context, text []byte) []Problem {
	h.changeMu.Lock()
	defer h.changeMu.Unlock()
	_, p, procs, problems := h.checkText(ctx, text)
	if p != nil {
		h.stopAll(procs)
	}
	return problems
}

// ApplyCompositionText checks text as CheckCompositionText does; with any
// problem nothing is written or changed. Otherwise text is written over
// the composition file (same mode, through a rename, so no reader sees it
// half written) and applied as a hot reload; the file watcher takes it as
// applied. If applying fails, the file gets its old text back and the
// running set stays as it was; the problems and the error say why.
func (h *Host) ApplyCompositionText(ctx context.Context, text []byte) ([]Problem, error) {
	h.changeMu.Lock()
	defer h.changeMu.Unlock()
	next, p, procs, problems := h.checkText(ctx, text)
	if len(problems) > 0 {
		return problems, nil
	}
	file := h.comp.File
	old, err := os.ReadFile(file)
	if err == nil {
		err = h.writeComposition(text)
	}
	if err != nil {
		h.stopAll(procs)
		return nil, fmt.Errorf("writing the composition %s: %w", file, err)
	}
	h.warnHostSection(next)
	if err := h.applyPlan(ctx, p, procs); err != nil {
		if werr := h.writeComposition(old); werr != nil {
			h.log.Error("the composition's edit failed to apply, and its old text could not be written back", "file", file, "error", werr)
			err = fmt.Errorf("%w\n(and %s keeps the edit: writing its old text back failed: %v)", err, file, werr)
		}
		return h.problemsOf(err), err
	}
	h.log.Info("composition edited from the console and applied", "file", file)
	return nil, nil
}

// checkText parses text as the composition file and plans it; on no
// problem the plan and its processes are the caller's to apply or stop.
// h.changeMu is held.
func (h *Host) checkText(ctx context.Context, text []byte) (*composition.Composition, *plan.Plan, map[string]*pluginproc.Process, []Problem) {
	next, err := composition.Parse(h.comp.File, text, h.console.lookup)
	if err != nil {
		return nil, nil, nil, h.problemsOf(err)
	}
	p, procs, err := h.planComposition(ctx, next)
	if err != nil {
		return nil, nil, nil, h.problemsOf(err)
	}
	if errs := h.check(ctx, p, procs); len(errs) > 0 {
		h.stopAll(procs)
		return nil, nil, nil, h.problemsOf(&LoadError{File: next.File, Errs: errs})
	}
	return next, p, procs, nil
}

// problemsOf lists the problems err holds, each at its place (the file
// only, when it has none).
func (h *Host) problemsOf(err error) []Problem {
	var errs []error
	var le *LoadError
	if errors.As(err, &le) {
		errs = le.Problems()
	} else {
		errs = plan.Flatten(err)
	}
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		var pos composition.Pos
		var pe *plan.Error
		var ce *composition.Error
		switch {
		case errors.As(e, &pe):
			pos = pe.Pos
		case errors.As(e, &ce):
			pos = ce.Pos
		}
		file := pos.File
		if file == "" {
			file = h.comp.File
		}
		// The message goes without the place it starts with: the
		// problem carries it.
		prefixes := []string{composition.Pos{File: file}.String() + ": ", file + ": "}
		if pos.Line > 0 {
			prefixes = append([]string{pos.String() + ": "}, prefixes...)
		}
		msg := e.Error()
		for _, prefix := range prefixes {
			if strings.HasPrefix(msg, prefix) {
				msg = strings.TrimPrefix(msg, prefix)
				break
			}
		}
		out = append(out, Problem{File: file, Line: pos.Line, Col: pos.Column, Message: msg})
	}
	return out
}

// writeComposition replaces the composition file's text in one rename,
// keeping its mode, and records the new file as applied so that the
// watcher does not apply it again.
func (h *Host) writeComposition(text []byte) error {
	target := h.comp.File
	if real, err := filepath.EvalSymlinks(target); err == nil {
		target = real // a link stays a link
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(target); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone by the rename, unless it failed
	_, err = tmp.Write(text)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	h.stampMu.Lock()
	defer h.stampMu.Unlock()
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	h.compStamp = stamp(h.comp.File)
	return nil
}
