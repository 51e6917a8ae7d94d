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
	"github.com/dshrun/dsh/registry"
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
	// Stamps taken when the host loaded: an edit made since then counts.
	compStamp := h.compStamp
	// Each entry's binary as last seen: a stamp that changes under the same
	// path is a rebuild; a new path (an edited entry) is only recorded.
	type seenBinary struct {
		path string
		st   fileStamp
	}
	bins := map[string]seenBinary{}
	for _, en := range h.entryList() {
		if st, ok := h.binStamps[en.e.ID]; ok {
			bins[en.e.ID] = seenBinary{en.binary, st}
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
			// Entries added or moved by the edit are watched from their
			// current build.
			for _, en := range h.entryList() {
				if b, ok := bins[en.e.ID]; (!ok || b.path != en.binary) && en.binary != "" {
					bins[en.e.ID] = seenBinary{en.binary, stamp(en.binary)}
				}
			}
			report("composition "+h.comp.File, err)
			continue
		}
		for _, en := range h.entryList() {
			if en.binary == "" || en.e.Disabled {
				continue
			}
			b, ok := bins[en.e.ID]
			if !ok || b.path != en.binary {
				bins[en.e.ID] = seenBinary{en.binary, stamp(en.binary)}
				continue
			}
			if st := stamp(en.binary); st != b.st && st.size > 0 {
				bins[en.e.ID] = seenBinary{en.binary, st}
				report("rebuilt "+en.binary, h.Reload(ctx, en.e.ID))
			}
		}
	}
}

// ApplyComposition moves the running host to next, entry by entry. Every
// change is checked before any is made; an error leaves the host as it was.
func (h *Host) ApplyComposition(ctx context.Context, next *composition.Composition) error {
	h.changeMu.Lock()
	defer h.changeMu.Unlock()
	if !reflect.DeepEqual(next.Host, h.comp.Host) {
		// Timeouts, the pulse and the scrub are set up when the host
		// starts; applying them to a running host is not supported.
		h.log.Warn("the host section changed; it is read at start only: restart dsh to apply it", "file", next.File)
	}
	type change struct {
		en     *entry
		e      composition.Entry
		config []byte
	}
	var reloads []change
	var moves []retarget
	var removes []*entry
	var adds []*entry
	var errs []error
	seen := map[string]bool{}
	for _, e := range next.Plugins {
		seen[e.ID] = true
		en := h.find(e.ID)
		switch {
		case en == nil && e.Disabled:
		case en == nil || (!e.Disabled && en.e.Disabled):
			adds = append(adds, &entry{h: h, id: e.ID, e: e})
		case e.Disabled && !en.e.Disabled:
			removes = append(removes, en)
		case e.Disabled:
		default:
			bin, err := next.Resolve(e, h.opts.PluginPath)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if bin != en.binary || e.SHA256 != en.e.SHA256 {
				// Another binary: a reload onto it (checked there).
				moves = append(moves, retarget{comp: next, e: e, binary: bin})
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
	for _, en := range h.entryList() {
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
	for _, en := range h.entryList() {
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
	if len(errs) == 0 && len(adds) > 0 {
		errs = h.prepareAdds(ctx, next, adds, removes)
	}
	if len(errs) > 0 {
		for _, en := range adds {
			if p := en.takeSpare(); p != nil {
				_ = p.Stop(context.WithoutCancel(ctx))
			}
		}
		return &LoadError{File: next.File, Errs: errs}
	}
	for _, mv := range moves {
		if err := h.reload(ctx, h.find(mv.e.ID), &mv); err != nil {
			errs = append(errs, &EntryError{Pos: mv.e.Pos, ID: mv.e.ID, Err: err})
		}
	}
	for _, r := range reloads {
		r.en.mu.Lock()
		r.en.config, r.en.e = r.config, r.e
		r.en.mu.Unlock()
		if err := h.reload(ctx, r.en, nil); err != nil {
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
	for _, en := range adds {
		s, err := h.reg.Add(registry.Spec{ID: en.e.ID, Label: en.label(), Inject: en.deps(), Apply: h.applyEntry(en)})
		if err != nil {
			if p := en.takeSpare(); p != nil {
				_ = p.Stop(context.WithoutCancel(ctx))
			}
			errs = append(errs, fmt.Errorf("add %q: %w", en.e.ID, err))
			continue
		}
		en.setScope(s)
		h.mu.Lock()
		h.byID[en.e.ID] = en
		replaced := false
		for i, old := range h.entries {
			if old.e.ID == en.e.ID {
				h.entries[i], replaced = en, true
			}
		}
		if !replaced {
			h.entries = append(h.entries, en)
		}
		h.mu.Unlock()
		if err := h.settle(ctx, s, en.e.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// prepareAdds starts and describes new entries and checks them against
// what will be running: one provider per key, every required inject
// provided, a config that fits the schema.
func (h *Host) prepareAdds(ctx context.Context, next *composition.Composition, adds, removes []*entry) []error {
	var errs []error
	providers := map[string]string{}
	for _, en := range h.entryList() {
		if en.e.Disabled || en.desc == nil || containsEntry(removes, en) {
			continue
		}
		for _, p := range en.desc.Provides {
			providers[p.Key] = en.e.ID
		}
	}
	for _, en := range adds {
		bin, err := next.Resolve(en.e, h.opts.PluginPath)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		en.binary = bin
		p, err := en.start(ctx)
		if err != nil {
			errs = append(errs, &EntryError{Pos: en.e.Pos, ID: en.e.ID, Err: err})
			continue
		}
		en.spare, en.desc = p, p.Description()
		for _, pr := range en.desc.Provides {
			if other, ok := providers[pr.Key]; ok || isCore(pr.Key) {
				errs = append(errs, en.errorf("service %q is already provided by %q", pr.Key, other))
			}
			providers[pr.Key] = en.e.ID
		}
		if cfg, err := effectiveConfig(next, en.e, en.desc); err != nil {
			errs = append(errs, err)
		} else {
			en.config = cfg
		}
	}
	for _, en := range adds {
		if en.desc == nil {
			continue
		}
		for _, in := range en.desc.Inject {
			if _, ok := providers[in.Key]; !ok && !in.Optional && !isCore(in.Key) {
				errs = append(errs, en.errorf("injects %q, which no plugin of the composition provides", in.Key))
			}
		}
	}
	return errs
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
	for _, en := range h.entryList() {
		if en.id == id {
			return en
		}
	}
	return nil
}
