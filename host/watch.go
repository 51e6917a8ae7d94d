package host

import (
	"context"
	"os"
	"time"

	"github.com/dshrun/dsh/host/composition"
)

// Hot reload: the composition file and the plugin binaries are polled. A
// rebuilt binary reloads its entry. An edited composition is read and
// checked whole first; a bad edit is reported and the running composition
// is kept. Otherwise the entries are diffed by id: changed ones reload
// (make-before-break; onto the new binary when name, path or sha256
// changed), removed or newly disabled ones are disposed
// (dependents first), new ones are added.

type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi.ModTime(), fi.Size()}
}

// Watch polls every interval until ctx is done; report receives every
// outcome (nil for a successful change) for the front end to log.
func (h *Host) Watch(ctx context.Context, interval time.Duration, lookup func(string) (string, bool), report func(what string, err error)) {
	// Each entry's binary as last seen: a stamp that changes under the same
	// path is a rebuild; a new path (an edited entry) is only recorded.
	type seenBinary struct {
		path string
		st   fileStamp
	}
	bins := map[string]seenBinary{}
	for _, en := range h.entryList() {
		if st, ok := h.binStamps[en.id]; ok {
			bins[en.id] = seenBinary{en.bin(), st}
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var pending fileStamp // a change seen once, acted on when it holds still
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if st, edited := h.compEdited(); edited {
			// Editors write in steps: wait for one quiet interval so a
			// half-written file is never read.
			if st != pending {
				pending = st
				continue
			}
			applied, err := h.applyEdited(ctx, st, lookup)
			if !applied {
				continue // edited again meanwhile, or the console applied it
			}
			// Entries added or moved by the edit are watched from their
			// current build.
			for _, en := range h.entryList() {
				if b, ok := bins[en.id]; (!ok || b.path != en.bin()) && en.bin() != "" {
					bins[en.id] = seenBinary{en.bin(), stamp(en.bin())}
				}
			}
			report("composition "+h.comp.File, err)
			continue
		}
		for _, en := range h.entryList() {
			e, bin, _ := en.view()
			if bin == "" || e.Disabled {
				continue
			}
			b, ok := bins[en.id]
			if !ok || b.path != bin {
				bins[en.id] = seenBinary{bin, stamp(bin)}
				continue
			}
			if st := stamp(bin); st != b.st && st.size > 0 {
				bins[en.id] = seenBinary{bin, st}
				report("rebuilt "+bin, h.Reload(ctx, en.id))
			}
		}
	}
}

// compEdited is the composition file's stamp, and whether it differs from
// the one last applied (an edit made since, in the file, counts).
func (h *Host) compEdited() (fileStamp, bool) {
	h.stampMu.Lock()
	defer h.stampMu.Unlock()
	st := stamp(h.comp.File)
	return st, st != h.compStamp
}

// applyEdited loads and applies the composition file if its stamp is
// still st and not yet applied; applied is false when it was not tried.
// Under h.changeMu: an edit the console writes and applies (which sets the
// stamp as it writes) is not applied again here.
func (h *Host) applyEdited(ctx context.Context, st fileStamp, lookup func(string) (string, bool)) (applied bool, err error) {
	h.changeMu.Lock()
	defer h.changeMu.Unlock()
	h.stampMu.Lock()
	cur := stamp(h.comp.File)
	if cur != st || cur == h.compStamp {
		h.stampMu.Unlock()
		return false, nil
	}
	h.compStamp = cur
	h.stampMu.Unlock()
	next, err := composition.Load(h.comp.File, lookup)
	if err == nil {
		err = h.applyComposition(ctx, next)
	}
	return true, err
}

func (h *Host) find(id string) *entry {
	for _, en := range h.entryList() {
		if en.id == id {
			return en
		}
	}
	return nil
}
