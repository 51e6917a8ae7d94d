// Package toolset is the host's ctx.tools: the registry of model-facing
// tools plugins register, and of the interceptors plugins set on their
// calls (Intercept: an effect of the plugin's scope, taken over like a
// tool), as the core/tools seam's Registrar for each
// calling plugin. A registration is an effect of the registering plugin's
// scope, so a plugin's tools vanish with it; a name held by one plugin is
// refused to another with both named; a plugin registers only the tools
// its description declares. Another process of the same plugin entry
// takes a tool over (a restart, a swap, a make-before-break reload) and,
// should its scope go while the one it took over from still serves, gives
// it back. A tool whose scope goes while its plugin entry still declares
// it (the plugin crashed for good, or waits for a provider that did) stays
// listed, marked Down, until the entry registers it again or no longer
// declares it (KeepWhileDown, Prune): an agent's tool list does not shrink
// because a process failed. Subscribers hear of a change only when what
// they list changed.
//
// What the registry needs of the host is in Caller and Slot; it holds no
// status codes (the seam's adapter gives them).
package toolset

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/internal/schemacheck"
	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// Slot is where a plugin entry serves tool calls: the process in it may be
// replaced (a restart in place, a swap) while the slot stays, and a new
// scope of the entry (a reload) has a slot of its own. Values are compared
// to tell one slot from another.
type Slot interface {
	comparable
	// Live reports whether the slot's scope still serves.
	Live() bool
}

// Caller is the plugin that calls ctx.tools, as the host knows it.
type Caller[S Slot] interface {
	// ID is the plugin's entry id; Label names it in messages.
	ID() string
	Label() string
	// Serving is the slot the calling process serves tool calls in and the
	// tools its description declares; ok is false for a caller that serves
	// no tool calls.
	Serving() (slot S, declared []string, ok bool)
	// AddEffect adds dispose to the caller's scope, to run when it goes.
	AddEffect(label string, dispose func(context.Context) error) error
}

// Tool is a registered tool.
type Tool[S Slot] struct {
	Spec   *tools.ToolSpec
	Plugin string // entry id
	Label  string
	Schema *schemacheck.Schema
	// Slot is where the registering process served: calls go to whichever
	// process holds it by then (a restarted one registers its tools again).
	Slot S
	// Down marks a tool whose scope went while its entry still declares
	// it: listed as it was, but no process serves it.
	Down bool
}

// Registry holds the tools. Safe for concurrent use.
type Registry[S Slot] struct {
	mu     sync.Mutex
	tools  map[string]*Tool[S]
	icepts map[string]*Interceptor[S] // by plugin entry id
	subs   map[chan struct{}]bool
	closed bool
	// keep says whether plugin still declares name (KeepWhileDown); nil
	// keeps nothing.
	keep func(plugin, name string) bool
}

// KeepWhileDown makes the registry keep a tool listed (Down) when the
// scope that registered it goes while keep(plugin, name) holds. Set it
// before any tool registers; keep must not call the registry.
func (r *Registry[S]) KeepWhileDown(keep func(plugin, name string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keep = keep
}

// Prune removes the Down tools keep no longer holds for (their entry went,
// or no longer declares them), telling subscribers if any went.
func (r *Registry[S]) Prune() {
	r.mu.Lock()
	keep := r.keep
	var down []*Tool[S]
	for _, t := range r.tools {
		if t.Down {
			down = append(down, t)
		}
	}
	r.mu.Unlock()
	changed := false
	for _, t := range down {
		if keep != nil && keep(t.Plugin, t.Spec.Name) {
			continue
		}
		r.mu.Lock()
		if r.tools[t.Spec.Name] == t {
			delete(r.tools, t.Spec.Name)
			changed = true
		}
		r.mu.Unlock()
	}
	if changed {
		r.tell()
	}
}

// wanted reports whether plugin still declares name (keep is read once per
// drop, outside the lock: it asks the host).
func (r *Registry[S]) wanted(plugin, name string) bool {
	r.mu.Lock()
	keep := r.keep
	r.mu.Unlock()
	return keep != nil && keep(plugin, name)
}

// New returns an empty registry.
func New[S Slot]() *Registry[S] {
	return &Registry[S]{tools: map[string]*Tool[S]{}, icepts: map[string]*Interceptor[S]{}, subs: map[chan struct{}]bool{}}
}

// For is ctx.tools for one calling plugin.
func (r *Registry[S]) For(c Caller[S]) tools.Registrar { return &registrar[S]{r: r, c: c} }

// Get returns the tool name.
func (r *Registry[S]) Get(name string) (*Tool[S], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tools[name]
	return t, ok
}

// List returns every tool, sorted by name.
func (r *Registry[S]) List() []*Tool[S] {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Tool[S], 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out
}

// Changes subscribes to changes of the listing: after a change the channel
// holds one value until it is received, however many changes came
// meanwhile. stop ends the subscription and closes the channel; Close
// closes every one.
func (r *Registry[S]) Changes() (changes <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		close(ch)
		return ch, func() {}
	}
	r.subs[ch] = true
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.subs[ch] {
			delete(r.subs, ch)
			close(ch)
		}
	}
}

// Close ends every subscription; changes after it are told to no one.
func (r *Registry[S]) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for ch := range r.subs {
		close(ch)
	}
	clear(r.subs)
}

// tell tells every subscriber the listing changed.
func (r *Registry[S]) tell() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default: // it has yet to hear of the previous change
		}
	}
}

// add registers t. Another process of the same plugin entry takes the
// tool over: a later process of the same slot (a restart or a swap,
// renewed: the scope's effect that removes it is already there), or the
// new scope of a make-before-break reload. prev is what it replaced.
func (r *Registry[S]) add(t *Tool[S]) (prev *Tool[S], renewed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.tools[t.Spec.Name]; ok {
		if cur.Plugin != t.Plugin {
			return nil, false, tools.Taken(fmt.Sprintf("tool %q is already registered by plugin %s; plugin %s cannot register it",
				t.Spec.Name, cur.Label, t.Label))
		}
		r.tools[t.Spec.Name] = t
		// A Down tool's effect already ran: the new one needs its own.
		return cur, cur.Slot == t.Slot && !cur.Down, nil
	}
	r.tools[t.Spec.Name] = t
	return nil, false, nil
}

// drop removes the registration of name made in slot, or gives the tool
// back to prev when prev's slot still serves, or (keep) leaves it listed
// as Down. It reports whether the listing changed.
func (r *Registry[S]) drop(name string, slot S, prev *Tool[S], keep bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.tools[name]
	if !ok || cur.Slot != slot {
		return false
	}
	if prev != nil && prev.Slot.Live() {
		r.tools[name] = prev
		return !proto.Equal(prev.Spec, cur.Spec)
	}
	if keep {
		down := *cur
		down.Down = true
		r.tools[name] = &down
		return false
	}
	delete(r.tools, name)
	return true
}

// remove drops the tool name if it was registered in slot.
func (r *Registry[S]) remove(name string, slot S) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.tools[name]; ok && cur.Slot == slot {
		delete(r.tools, name)
		return true
	}
	return false
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidName reports whether name is one a tool may have: the planner checks
// names that come from config with it, before any plugin registers them.
func ValidName(name string) bool { return toolName.MatchString(name) }

// registrar is ctx.tools for one calling plugin.
type registrar[S Slot] struct {
	r *Registry[S]
	c Caller[S]
}

func (p *registrar[S]) Register(_ context.Context, spec *tools.ToolSpec) error {
	if !toolName.MatchString(spec.Name) {
		return tools.Invalid(fmt.Sprintf("tool name %q: use 1 to 64 letters, digits, '_' or '-'", spec.Name))
	}
	sch, err := schemacheck.Compile([]byte(spec.InputSchema))
	if err != nil {
		return tools.Invalid(fmt.Sprintf("tool %q: input %v", spec.Name, err))
	}
	slot, declared, ok := p.c.Serving()
	if !ok {
		return tools.CannotRegister("this caller cannot serve tool calls")
	}
	if !slices.Contains(declared, spec.Name) {
		return seam.New(sdk.ErrPermissionDenied, fmt.Sprintf("plugin %s did not declare tool %q: add it to its description's Tools list (it declares %v)",
			p.c.Label(), spec.Name, declared))
	}
	t := &Tool[S]{Spec: spec, Plugin: p.c.ID(), Label: p.c.Label(), Schema: sch, Slot: slot}
	prev, renewed, err := p.r.add(t)
	if err != nil {
		return err
	}
	// Subscribers hear of a takeover only if what they list changed.
	changed := prev == nil || !proto.Equal(prev.Spec, spec)
	if renewed {
		if changed {
			p.r.tell()
		}
		return nil
	}
	// The registration is an effect of the caller's scope. When the scope
	// goes while the one it took the tool over from still serves (a
	// reload that failed), the tool goes back to that one.
	plugin := p.c.ID()
	if err := p.c.AddEffect("tool "+spec.Name, func(context.Context) error {
		if p.r.drop(spec.Name, slot, prev, p.r.wanted(plugin, spec.Name)) {
			p.r.tell()
		}
		return nil
	}); err != nil {
		p.r.drop(spec.Name, slot, prev, false)
		return tools.CannotRegister(fmt.Sprintf("tool %q: %v", spec.Name, err))
	}
	if changed {
		p.r.tell()
	}
	return nil
}

func (p *registrar[S]) Unregister(_ context.Context, name string) error {
	slot, _, ok := p.c.Serving()
	if !ok || !p.r.remove(name, slot) {
		return tools.NotRegistered(fmt.Sprintf("tool %q is not registered by plugin %s", name, p.c.Label()))
	}
	p.r.tell()
	return nil
}
