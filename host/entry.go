package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/registry"
	"github.com/dshrun/dsh/sdk/pluginv1"
)

// entry is one plugin of the composition and what the host knows of it.
type entry struct {
	h      *Host
	id     string // e.ID, which never changes: readable without mu
	e      composition.Entry
	binary string
	desc   *pluginv1.Description
	config []byte // effective config JSON, validated
	scope  *registry.Scope

	mu    sync.Mutex
	spare *pluginproc.Process // started for validation, used by the first load
	load  *load               // the current process, while loaded
	sup   supervision
	gen   int // reloads so far: names the registry scope of each
}

func (en *entry) label() string {
	if bin := en.bin(); bin != "" {
		return fmt.Sprintf("%q (%s)", en.id, bin)
	}
	return fmt.Sprintf("%q", en.id)
}

// bin is the entry's binary; reloads onto another binary change it.
func (en *entry) bin() string {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.binary
}

// view is the entry's composition entry, binary and description at one
// moment, for readers that run alongside reloads.
func (en *entry) view() (composition.Entry, string, *pluginv1.Description) {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.e, en.binary, en.desc
}

// procTarget is a binary, its pin and the config to apply, for an entry
// moving to another binary.
type procTarget struct {
	binary, sha256 string
	config         []byte
}

// configOr is the target's config, or the entry's own without a target.
func (t *procTarget) configOr(en *entry) []byte {
	if t == nil {
		return en.configJSON()
	}
	return t.config
}

func (en *entry) errorf(format string, args ...any) error {
	return &EntryError{Pos: en.e.Pos, ID: en.e.ID, Err: fmt.Errorf(format, args...)}
}

func (en *entry) deps() []registry.Dep {
	var out []registry.Dep
	for _, in := range en.desc.Inject {
		out = append(out, registry.Dep{Key: in.Key, Optional: in.Optional})
	}
	return out
}

func (en *entry) setDesc(d *pluginv1.Description) {
	en.mu.Lock()
	defer en.mu.Unlock()
	en.desc = d
}

func (en *entry) takeSpare() *pluginproc.Process {
	en.mu.Lock()
	defer en.mu.Unlock()
	p := en.spare
	en.spare = nil
	return p
}

func (en *entry) current() *load {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.load
}

// moveCurrent makes ld current in place of old, unless another load (a
// reload's new scope) became current meanwhile.
func (en *entry) moveCurrent(old, ld *load) {
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.load == old || en.load == nil {
		en.load = ld
	}
}

func (en *entry) setCurrent(ld *load) {
	en.mu.Lock()
	defer en.mu.Unlock()
	en.load = ld
}

func (en *entry) getScope() *registry.Scope {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.scope
}

func (en *entry) setScope(s *registry.Scope) {
	en.mu.Lock()
	defer en.mu.Unlock()
	en.scope = s
}

func (en *entry) configJSON() []byte {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.config
}

// clearCurrent forgets ld unless a newer load already replaced it.
func (en *entry) clearCurrent(ld *load) {
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.load == ld {
		en.load = nil
	}
}

func (en *entry) start(ctx context.Context) (*pluginproc.Process, error) {
	en.mu.Lock()
	bin, sha := en.binary, en.e.SHA256
	en.mu.Unlock()
	return en.startBinary(ctx, bin, sha)
}

// startBinary starts a process of the entry from bin (checked against
// sha256 when set): the entry's own binary, or the one it is moving to.
func (en *entry) startBinary(ctx context.Context, bin, sha256 string) (*pluginproc.Process, error) {
	h := en.h
	return pluginproc.Start(ctx, pluginproc.Config{
		ID:           en.e.ID,
		Binary:       bin,
		SHA256:       sha256,
		StartTimeout: h.startTimeout(),
		Env:          PluginEnv(h.opts.LookupEnv, en.e.ID),
		SocketDir:    h.rt.sockets(),
		Logger:       h.opts.PluginLogger.Named(en.e.ID),
	})
}

// describeAll resolves and starts every enabled entry in parallel, reads the
// descriptions and checks the composition against them. Every problem is
// reported, each at its entry's line.
func (h *Host) describeAll(ctx context.Context) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	add := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for _, en := range h.entries {
		bin, err := h.comp.Resolve(en.e, h.opts.PluginPath)
		if err != nil {
			if !en.e.Disabled {
				add(err)
			}
			continue
		}
		en.binary = bin
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := en.start(ctx)
			if err != nil {
				if !en.e.Disabled {
					add(&EntryError{Pos: en.e.Pos, ID: en.e.ID, Err: err})
				}
				return
			}
			en.desc = p.Description()
			if en.e.Disabled {
				// Described only so that errors can say what it would
				// have provided.
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.stopTimeout())
				defer cancel()
				_ = p.Stop(sctx)
				return
			}
			en.spare = p
		}()
	}
	wg.Wait()
	if len(errs) == 0 {
		errs = h.checkGraph()
	}
	if len(errs) == 0 {
		errs = h.checkConfigs()
	}
	if len(errs) > 0 {
		sortByLine(errs)
		return &LoadError{File: h.comp.File, Errs: errs}
	}
	return nil
}

func sortByLine(errs []error) {
	line := func(err error) int {
		var ee *EntryError
		var ce *composition.Error
		switch {
		case errors.As(err, &ee):
			return ee.Pos.Line
		case errors.As(err, &ce):
			return ce.Pos.Line
		}
		return 0
	}
	sort.SliceStable(errs, func(i, j int) bool { return line(errs[i]) < line(errs[j]) })
}

// checkGraph finds duplicate providers, injects nobody provides (or only a
// disabled entry provides) and dependency cycles.
func (h *Host) checkGraph() []error {
	var errs []error
	providers := map[string]*entry{}
	for _, en := range h.entries {
		if en.e.Disabled {
			continue
		}
		for _, p := range en.desc.Provides {
			if isCore(p.Key) {
				errs = append(errs, en.errorf("service %q is provided by the host itself; a plugin cannot provide it", p.Key))
				continue
			}
			if first, ok := providers[p.Key]; ok {
				errs = append(errs, en.errorf("service %q is already provided by plugin %q (%s); one provider per key",
					p.Key, first.e.ID, first.e.Pos))
				continue
			}
			providers[p.Key] = en
			for _, s := range p.GrpcServices {
				h.serviceKeys[s] = p.Key
			}
		}
	}
	disabledProvider := func(key string) *entry {
		for _, en := range h.entries {
			if !en.e.Disabled || en.desc == nil {
				continue
			}
			for _, p := range en.desc.Provides {
				if p.Key == key {
					return en
				}
			}
		}
		return nil
	}
	for _, en := range h.entries {
		if en.e.Disabled {
			continue
		}
		for _, in := range en.desc.Inject {
			if in.Optional || providers[in.Key] != nil || isCore(in.Key) {
				continue
			}
			if d := disabledProvider(in.Key); d != nil {
				errs = append(errs, en.errorf("injects %q, which only the disabled plugin %q (%s) would provide", in.Key, d.e.ID, d.e.Pos))
			} else {
				errs = append(errs, en.errorf("injects %q, which no plugin of the composition provides", in.Key))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return h.findCycles(providers)
}

// findCycles reports each cycle of required injects once.
func (h *Host) findCycles(providers map[string]*entry) []error {
	const (
		white = iota
		grey
		black
	)
	color := map[*entry]int{}
	var stack []*entry
	var errs []error
	var visit func(en *entry)
	visit = func(en *entry) {
		color[en] = grey
		stack = append(stack, en)
		for _, in := range en.desc.Inject {
			if in.Optional {
				continue
			}
			p := providers[in.Key]
			if p == nil {
				continue
			}
			switch color[p] {
			case white:
				visit(p)
			case grey:
				i := len(stack) - 1
				for stack[i] != p {
					i--
				}
				var path []string
				for _, s := range stack[i:] {
					path = append(path, fmt.Sprintf("%q (line %d)", s.e.ID, s.e.Pos.Line))
				}
				path = append(path, fmt.Sprintf("%q", p.e.ID))
				errs = append(errs, p.errorf("dependency cycle: %s", strings.Join(path, " -> ")))
			}
		}
		stack = stack[:len(stack)-1]
		color[en] = black
	}
	for _, en := range h.entries {
		if !en.e.Disabled && color[en] == white {
			visit(en)
		}
	}
	return errs
}

// effectiveConfig is the settings namespace the plugin reads, overlaid with
// the entry's config, checked against the plugin's schema.
func effectiveConfig(comp *composition.Composition, e composition.Entry, desc *pluginv1.Description) ([]byte, error) {
	cfg := map[string]any{}
	if ns := desc.SettingsNamespace; ns != "" {
		mergeInto(cfg, comp.Settings[ns])
	}
	mergeInto(cfg, e.Config)
	if err := composition.ValidateConfig(e, cfg, []byte(desc.ConfigSchema)); err != nil {
		return nil, err
	}
	return json.Marshal(cfg)
}

// checkConfigs builds each effective config (the settings namespace the
// plugin reads, overlaid with the entry's config) and validates it against
// the plugin's schema.
func (h *Host) checkConfigs() []error {
	var errs []error
	for _, en := range h.entries {
		if en.e.Disabled {
			continue
		}
		b, err := effectiveConfig(h.comp, en.e, en.desc)
		if err != nil {
			errs = append(errs, err) // already names the file, line and entry
			continue
		}
		en.config = b
	}
	return errs
}

// mergeInto overlays src onto dst, recursing into maps.
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeInto(dm, sm)
				continue
			}
			cp := map[string]any{}
			mergeInto(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}
