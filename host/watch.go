package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/dshrun/dsh/host/composition"
)

// Hot reload: the composition file and the plugin binaries are polled. A
// rebuilt binary reloads its entry. An edited composition is read and
// checked whole first; a bad edit is reported and the running composition
// is kept. Otherwise the entries are diffed by id: changed ones reload
// (make-before-break), removed or newly disabled ones are disposed
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
	// Stamps taken when the host loaded: an edit made since then counts.
	compStamp := h.compStamp
	bins := map[string]fileStamp{}
	for id, st := range h.binStamps {
		bins[id] = st
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
		if st := stamp(h.comp.File); st != compStamp {
			// Editors write in steps: wait for one quiet interval so a
			// half-written file is never read.
			if st != pending {
				pending = st
				continue
			}
			compStamp = st
			next, err := composition.Load(h.comp.File, lookup)
			if err == nil {
				err = h.ApplyComposition(ctx, next)
			}
			report("composition "+h.comp.File, err)
			continue
		}
		for _, en := range h.entries {
			if en.binary == "" || en.e.Disabled {
				continue
			}
			if st := stamp(en.binary); st != bins[en.e.ID] && st.size > 0 {
				bins[en.e.ID] = st
				report("rebuilt "+en.binary, h.Reload(ctx, en.e.ID))
			}
		}
	}
}

// ApplyComposition moves the running host to next, entry by entry. Every
// change is checked before any is made; an error leaves the host as it was.
func (h *Host) ApplyComposition(ctx context.Context, next *composition.Composition) error {
	type change struct {
		en     *entry
		e      composition.Entry
		config []byte
	}
	var reloads []change
	var removes []*entry
	var errs []error
	seen := map[string]bool{}
	for _, e := range next.Plugins {
		seen[e.ID] = true
		en := h.find(e.ID)
		switch {
		case en == nil && e.Disabled:
		case en == nil:
			errs = append(errs, &EntryError{Pos: e.Pos, ID: e.ID, Err: errors.New("a new entry needs a restart of dsh serve (adding entries to a running host is not supported yet)")})
		case e.Disabled && !en.e.Disabled:
			removes = append(removes, en)
		case !e.Disabled && en.e.Disabled:
			errs = append(errs, &EntryError{Pos: e.Pos, ID: e.ID, Err: errors.New("enabling an entry needs a restart of dsh serve")})
		case e.Disabled:
		default:
			bin, err := next.Resolve(e, h.opts.PluginPath)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if bin != en.binary || e.SHA256 != en.e.SHA256 {
				errs = append(errs, &EntryError{Pos: e.Pos, ID: e.ID, Err: errors.New("a different binary needs a restart of dsh serve (a rebuilt one reloads by itself)")})
				continue
			}
			cfg, err := effectiveConfig(next, e, en.desc)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !bytes.Equal(cfg, en.configJSON()) || !reflect.DeepEqual(e.Config, en.e.Config) {
				reloads = append(reloads, change{en, e, cfg})
			}
		}
	}
	for _, en := range h.entries {
		if !seen[en.e.ID] && !en.e.Disabled {
			removes = append(removes, en)
		}
	}
	// A removed provider must not leave a required inject without one.
	gone := map[string]*entry{}
	for _, en := range removes {
		for _, p := range en.desc.Provides {
			gone[p.Key] = en
		}
	}
	for _, en := range h.entries {
		if en.e.Disabled || !seen[en.e.ID] || containsEntry(removes, en) {
			continue
		}
		for _, in := range en.desc.Inject {
			if p := gone[in.Key]; p != nil && !in.Optional {
				errs = append(errs, &EntryError{Pos: p.e.Pos, ID: p.e.ID,
					Err: fmt.Errorf("cannot be removed: plugin %q injects %q, which it provides", en.e.ID, in.Key)})
			}
		}
	}
	if len(errs) > 0 {
		return &LoadError{File: next.File, Errs: errs}
	}
	for _, r := range reloads {
		r.en.mu.Lock()
		r.en.config, r.en.e = r.config, r.e
		r.en.mu.Unlock()
		if err := h.Reload(ctx, r.en.e.ID); err != nil {
			errs = append(errs, err)
		}
	}
	for _, en := range removes {
		if s := en.getScope(); s != nil {
			if err := s.Dispose(ctx); err != nil {
				errs = append(errs, fmt.Errorf("remove %q: %w", en.e.ID, err))
			}
		}
		en.mu.Lock()
		en.e.Disabled = true
		en.mu.Unlock()
		h.mu.Lock()
		delete(h.byID, en.e.ID)
		h.mu.Unlock()
	}
	return errors.Join(errs...)
}

func containsEntry(list []*entry, en *entry) bool {
	for _, e := range list {
		if e == en {
			return true
		}
	}
	return false
}

func (h *Host) find(id string) *entry {
	for _, en := range h.entries {
		if en.e.ID == id {
			return en
		}
	}
	return nil
}
