// Package plan decides what a composition asks of the host, without
// starting or stopping anything: one check of a whole composition against
// its plugins' descriptions, and the steps that move the running set to it.
// dsh validate, start and hot reload all go through Make, so a composition
// is refused for the same reasons whichever way it arrives. Applying a plan
// (processes, registry scopes, the swap of keys) is the host's job.
package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/toolset"
)

// Described is what the host learnt of one entry's binary before planning.
type Described struct {
	Binary string                 // resolved path; "" when resolving failed
	Desc   *lifecycle.Description // nil when the binary could not be described
	Err    error                  // why not, already positioned (resolve or start)
}

// Running is one entry the host runs now.
type Running struct {
	Entry  composition.Entry
	Binary string
	Desc   *lifecycle.Description
	Config []byte // effective config JSON
	// Tools are the tools it may register: Desc.Tools, then the names its
	// config gives the Desc.ToolsFromConfig keys (see ResolveTools).
	Tools []string
}

// Input is everything a plan is made from.
type Input struct {
	Comp *composition.Composition
	// Described holds, by entry id, the binary and description of every
	// entry of Comp that needed describing: each enabled entry that does not
	// run yet or moves to another binary, and any disabled one the host
	// chose to describe (errors then say what it would have provided).
	Described map[string]Described
	// Running is the running set, in its composition order; empty at start.
	Running []Running
	// Core reports whether the host itself provides key.
	Core func(key string) bool
}

// Action is what a step does to one entry.
type Action int

const (
	Keep   Action = iota // runs on, untouched
	Add                  // starts: it does not run yet
	Reload               // a new process of the same binary with another config
	Move                 // a new process of another binary (name, path or sha256 changed)
	Remove               // disposed: removed from the file or disabled
)

func (a Action) String() string {
	return [...]string{"keep", "add", "reload", "move", "remove"}[a]
}

// Step is one entry's part of a plan.
type Step struct {
	ID     string
	Action Action
	Entry  composition.Entry      // as the composition now has it (as it ran, for Remove)
	Binary string                 // what it runs from once the plan is applied
	Desc   *lifecycle.Description // what that binary describes
	Config []byte                 // its effective config JSON
	// Tools are the tools it may register, resolved from Desc and Config
	// (see ResolveTools).
	Tools []string
	// Was is the running entry a Reload, Move or Remove replaces.
	Was *Running
}

// Plan moves the running set to a composition.
type Plan struct {
	Comp *composition.Composition
	// Steps has one step per enabled entry, in composition order, then the
	// removals, dependents before their providers.
	Steps []Step
}

// Changes are the steps that change something (all but Keep).
func (p *Plan) Changes() []Step {
	var out []Step
	for _, s := range p.Steps {
		if s.Action != Keep {
			out = append(out, s)
		}
	}
	return out
}

// Error is a problem with one entry, at its place in the composition.
type Error struct {
	Pos composition.Pos
	ID  string
	Err error
}

func (e *Error) Error() string {
	// A plugin process's own error names it already, with its binary.
	named := fmt.Sprintf("plugin %q", e.ID)
	if msg := e.Err.Error(); strings.HasPrefix(msg, named) {
		return fmt.Sprintf("%s: %s", e.Pos, msg)
	}
	return fmt.Sprintf("%s: %s: %v", e.Pos, named, e.Err)
}
func (e *Error) Unwrap() error { return e.Err }

func errorAt(e composition.Entry, format string, args ...any) error {
	return &Error{Pos: e.Pos, ID: e.ID, Err: fmt.Errorf(format, args...)}
}

// Make checks the composition and returns the plan, or every problem found,
// sorted by line. Problems are those of the composition as a whole, as
// validate reports them, plus what a running set cannot do: an entry that
// moves to a binary with other keys (give it a new id instead).
func Make(in Input) (*Plan, []error) {
	running := map[string]*Running{}
	for i := range in.Running {
		running[in.Running[i].Entry.ID] = &in.Running[i]
	}
	core := in.Core
	if core == nil {
		core = func(string) bool { return false }
	}
	var errs []error
	var steps []Step
	for _, e := range in.Comp.Plugins {
		if e.Disabled {
			continue
		}
		was := running[e.ID]
		d, described := in.Described[e.ID]
		st := Step{ID: e.ID, Entry: e, Was: was}
		switch {
		case described && d.Err != nil:
			errs = append(errs, d.Err)
			continue
		case described:
			st.Binary, st.Desc = d.Binary, d.Desc
		case was != nil:
			st.Binary, st.Desc = was.Binary, was.Desc
		default:
			errs = append(errs, errorAt(e, "not described"))
			continue
		}
		switch {
		case was == nil:
			st.Action = Add
		case st.Binary != was.Binary || e.SHA256 != was.Entry.SHA256:
			st.Action = Move
		}
		if was != nil && described && !SameKeys(was.Desc, st.Desc) {
			// Dependents are bound to what it provides and injects.
			errs = append(errs, errorAt(e, "%s %s, other keys than %s (%s); give it a new id instead",
				st.Binary, KeysOf(st.Desc), was.Binary, KeysOf(was.Desc)))
		}
		steps = append(steps, st)
	}
	// Tool names may come from config, so the config of every step is
	// resolved before the graph is checked; its errors still follow the
	// graph's, as they did.
	var cfgErrs []error
	for i := range steps {
		st := &steps[i]
		// Until resolved, the declared tools still collide with others'.
		st.Tools = slices.Clone(st.Desc.Tools)
		cfg, err := EffectiveConfig(in.Comp, st.Entry, st.Desc)
		if err != nil {
			cfgErrs = append(cfgErrs, Flatten(err)...) // each names the file, line and entry
			continue
		}
		st.Config = cfg
		tools, err := ResolveTools(st.Entry, st.Desc, cfg)
		if err != nil {
			cfgErrs = append(cfgErrs, err)
			continue
		}
		st.Tools = tools
		if st.Action == Keep && (string(cfg) != string(st.Was.Config) || !configEqual(st.Entry.Config, st.Was.Entry.Config)) {
			st.Action = Reload
		}
	}
	errs = append(errs, checkGraph(in, steps, core)...)
	errs = append(errs, cfgErrs...)
	if len(errs) > 0 {
		SortByLine(errs)
		return nil, errs
	}
	steps = append(steps, removals(in, steps)...)
	return &Plan{Comp: in.Comp, Steps: steps}, nil
}

// checkGraph finds keys the host provides itself, duplicate providers,
// duplicate tools, injects nobody provides (or only a disabled entry
// would) and dependency cycles.
func checkGraph(in Input, steps []Step, core func(string) bool) []error {
	var errs []error
	providers := map[string]*Step{}
	tools := map[string]*Step{}
	for i := range steps {
		st := &steps[i]
		for _, p := range st.Desc.Provides {
			if core(p.Key) {
				errs = append(errs, errorAt(st.Entry, "service %q is provided by the host itself; a plugin cannot provide it", p.Key))
				continue
			}
			if first, ok := providers[p.Key]; ok {
				errs = append(errs, errorAt(st.Entry, "service %q is already provided by plugin %q (%s); one provider per key",
					p.Key, first.ID, first.Entry.Pos))
				continue
			}
			providers[p.Key] = st
		}
		for _, name := range st.Tools {
			if first, ok := tools[name]; ok {
				errs = append(errs, errorAt(st.Entry, "tool %q is already registered by plugin %q (%s); tool names are unique across the composition",
					name, first.ID, first.Entry.Pos))
				continue
			}
			tools[name] = st
		}
	}
	disabledProvider := func(key string) (composition.Entry, bool) {
		for _, e := range in.Comp.Plugins {
			if d, ok := in.Described[e.ID]; ok && e.Disabled && d.Desc != nil && lifecycle.Provides(d.Desc, key) {
				return e, true
			}
		}
		return composition.Entry{}, false
	}
	removedProvider := func(key string) (composition.Entry, bool) {
		for _, r := range in.Running {
			if !slices.ContainsFunc(steps, func(st Step) bool { return st.ID == r.Entry.ID }) && lifecycle.Provides(r.Desc, key) {
				return r.Entry, true
			}
		}
		return composition.Entry{}, false
	}
	for _, st := range steps {
		for _, inj := range st.Desc.Inject {
			if inj.Optional || providers[inj.Key] != nil || core(inj.Key) {
				continue
			}
			if r, ok := removedProvider(inj.Key); ok {
				errs = append(errs, errorAt(st.Entry, "injects %q, which plugin %q (%s) provides: that plugin cannot be removed while this one needs it",
					inj.Key, r.ID, r.Pos))
			} else if d, ok := disabledProvider(inj.Key); ok {
				errs = append(errs, errorAt(st.Entry, "injects %q, which only the disabled plugin %q (%s) would provide", inj.Key, d.ID, d.Pos))
			} else {
				errs = append(errs, errorAt(st.Entry, "injects %q, which no plugin of the composition provides", inj.Key))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return findCycles(steps, providers)
}

// findCycles reports each cycle of required injects once.
func findCycles(steps []Step, providers map[string]*Step) []error {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []*Step
	var errs []error
	var visit func(st *Step)
	visit = func(st *Step) {
		color[st.ID] = grey
		stack = append(stack, st)
		for _, inj := range st.Desc.Inject {
			p := providers[inj.Key]
			if inj.Optional || p == nil {
				continue
			}
			switch color[p.ID] {
			case white:
				visit(p)
			case grey:
				i := len(stack) - 1
				for stack[i].ID != p.ID {
					i--
				}
				var path []string
				for _, s := range stack[i:] {
					path = append(path, fmt.Sprintf("%q (line %d)", s.ID, s.Entry.Pos.Line))
				}
				path = append(path, fmt.Sprintf("%q", p.ID))
				errs = append(errs, errorAt(p.Entry, "dependency cycle: %s", strings.Join(path, " -> ")))
			}
		}
		stack = stack[:len(stack)-1]
		color[st.ID] = black
	}
	for i := range steps {
		if color[steps[i].ID] == white {
			visit(&steps[i])
		}
	}
	return errs
}

// removals are the running entries the composition no longer has enabled,
// dependents before their providers.
func removals(in Input, steps []Step) []Step {
	kept := map[string]bool{}
	for _, st := range steps {
		kept[st.ID] = true
	}
	var gone []*Running
	for i := range in.Running {
		if r := &in.Running[i]; !kept[r.Entry.ID] {
			gone = append(gone, r)
		}
	}
	// Repeatedly take one that no other remaining removal injects from.
	var out []Step
	for len(gone) > 0 {
		i := slices.IndexFunc(gone, func(r *Running) bool {
			for _, o := range gone {
				if o != r && injectsFrom(o.Desc, r.Desc) {
					return false
				}
			}
			return true
		})
		if i < 0 {
			i = 0 // a cycle among removals: the registry unloads dependents first anyway
		}
		r := gone[i]
		gone = slices.Delete(gone, i, i+1)
		out = append(out, Step{ID: r.Entry.ID, Action: Remove, Entry: r.Entry, Binary: r.Binary, Desc: r.Desc, Config: r.Config, Tools: r.Tools, Was: r})
	}
	return out
}

// injectsFrom reports whether a injects a key b provides.
func injectsFrom(a, b *lifecycle.Description) bool {
	for _, inj := range a.Inject {
		if lifecycle.Provides(b, inj.Key) {
			return true
		}
	}
	return false
}

// EffectiveConfig is the settings namespace the plugin reads, overlaid with
// the entry's config, checked against the plugin's schema.
func EffectiveConfig(comp *composition.Composition, e composition.Entry, desc *lifecycle.Description) ([]byte, error) {
	cfg := map[string]any{}
	if ns := desc.SettingsNamespace; ns != "" {
		mergeInto(cfg, comp.Settings[ns])
	}
	mergeInto(cfg, e.Config)
	if err := comp.ValidateConfig(e, desc.SettingsNamespace, cfg, []byte(desc.ConfigSchema)); err != nil {
		return nil, err
	}
	return json.Marshal(cfg)
}

// ResolveTools is the tools an entry may register: desc.Tools, then for
// each of desc.ToolsFromConfig the string its effective config cfg gives
// that top-level key, or else the default of that property in the config
// schema. A key with neither, or a value that is no valid tool name, is an
// error at the entry.
func ResolveTools(e composition.Entry, desc *lifecycle.Description, cfg []byte) ([]string, error) {
	out := slices.Clone(desc.Tools)
	if len(desc.ToolsFromConfig) == 0 {
		return out, nil
	}
	var values map[string]any
	if err := json.Unmarshal(cfg, &values); err != nil {
		return nil, errorAt(e, "effective config: %v", err)
	}
	var schema struct {
		Properties map[string]struct {
			Default any `json:"default"`
		} `json:"properties"`
	}
	if desc.ConfigSchema != "" {
		if err := json.Unmarshal([]byte(desc.ConfigSchema), &schema); err != nil {
			return nil, errorAt(e, "config schema: %v", err)
		}
	}
	for _, key := range desc.ToolsFromConfig {
		v, ok := values[key]
		from := "config key"
		if !ok {
			v, ok = schema.Properties[key].Default, schema.Properties[key].Default != nil
			from = "default of config key"
		}
		if !ok {
			return nil, errorAt(e, "config key %q names a tool the plugin registers (ToolsFromConfig), but neither the config nor the schema's default sets it", key)
		}
		name, isString := v.(string)
		if !isString || !toolset.ValidName(name) {
			return nil, errorAt(e, "%s %q names a tool, but %s is not a tool name: use 1 to 64 letters, digits, '_' or '-'", from, key, jsonText(v))
		}
		if slices.Contains(out, name) {
			return nil, errorAt(e, "%s %q names tool %q, which the plugin already registers", from, key, name)
		}
		out = append(out, name)
	}
	return out, nil
}

// jsonText is v as config shows it, for errors.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
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

// configEqual compares two entries' own config maps by their JSON.
func configEqual(a, b map[string]any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// SortByLine orders positioned errors by their place in the composition
// (line, then column).
func SortByLine(errs []error) {
	pos := func(err error) composition.Pos {
		var pe *Error
		var ce *composition.Error
		switch {
		case errors.As(err, &pe):
			return pe.Pos
		case errors.As(err, &ce):
			return ce.Pos
		}
		return composition.Pos{}
	}
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := pos(errs[i]), pos(errs[j])
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// Flatten lists the problems err holds: those joined in it (errors.Join,
// a list of problems), each on its own, or err itself.
func Flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Flatten(e)...)
	}
	return out
}

// KeysOf says what a description provides and injects, for errors.
func KeysOf(d *lifecycle.Description) string {
	var provides, injects []string
	for _, p := range d.Provides {
		provides = append(provides, p.Key)
	}
	for _, inj := range d.Inject {
		injects = append(injects, inj.Key)
	}
	return fmt.Sprintf("provides %v, injects %v", provides, injects)
}

// SameKeys reports whether a and b provide and inject the same keys, in
// order (an entry that changes them is another entry).
func SameKeys(a, b *lifecycle.Description) bool {
	return slices.EqualFunc(a.Provides, b.Provides, func(x, y *lifecycle.Provide) bool { return x.Key == y.Key }) &&
		slices.EqualFunc(a.Inject, b.Inject, func(x, y *lifecycle.Inject) bool {
			return x.Key == y.Key && x.Optional == y.Optional
		})
}
