package termsessions

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/terminals"
)

// Slot is where a backend plugin entry serves: the process in it may be
// replaced (a restart in place) while the slot stays, and a new scope of
// the entry (a reload) has a slot of its own. Values are compared to tell
// one slot from another.
type Slot interface {
	// Live reports whether the slot's scope still serves.
	Live() bool
	// Reach is a connection to the slot's current process on which every
	// call acts for owner, under call: a call id of owner's, made for it,
	// that reaches the plugin (so what the plugin spawns meanwhile is
	// owner's). end forgets the call.
	Reach(owner string) (conn grpc.ClientConnInterface, call string, end func())
}

// Caller is the plugin that registers a backend, as the host knows it.
type Caller interface {
	// ID is the plugin's entry id; Label names it in messages.
	ID() string
	Label() string
	// Serving is the slot the calling process serves in; ok is false for
	// a caller that serves nothing.
	Serving() (slot Slot, ok bool)
	// AddEffect adds dispose to the caller's scope, to run when it goes.
	AddEffect(label string, dispose func(context.Context) error) error
}

// backend is a registered backend.
type backend struct {
	name, dialect string
	plugin, label string // the registering entry
	slot          Slot
}

// backendName bounds the name a backend is registered under.
var backendName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// RegisterBackend publishes c as backend name. Another process of the
// same plugin entry takes the name over: a later process of the same slot
// (a restart: the scope's effect that removes it is there already) or the
// new scope of a reload; should that scope go while the one it took over
// from still serves, the name goes back to that one.
func (m *Manager) RegisterBackend(c Caller, name, dialect string) error {
	if !backendName.MatchString(name) {
		return terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("backend name %q: use 1 to 64 letters, digits, '.', '_' or '-'", name))
	}
	slot, ok := c.Serving()
	if !ok {
		return terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("plugin %s serves nothing the host can call, so it cannot be a terminal backend", c.Label()))
	}
	b := &backend{name: name, dialect: dialect, plugin: c.ID(), label: c.Label(), slot: slot}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errDisposing
	}
	prev := m.backends[name]
	if prev != nil && prev.plugin != b.plugin {
		m.mu.Unlock()
		return terminals.Errorf(terminals.ErrDuplicateBackend, fmt.Sprintf("terminal backend %q is registered by plugin %s; plugin %s cannot register it (give one of them another name)", name, prev.label, b.label))
	}
	m.backends[name] = b
	renewed := prev != nil && prev.slot == slot
	m.mu.Unlock()
	if renewed {
		return nil
	}
	drop := func() { m.dropBackend(name, slot, prev) }
	if err := c.AddEffect("terminal backend "+name, func(context.Context) error {
		drop()
		return nil
	}); err != nil {
		drop()
		return terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("terminal backend %q: plugin %s: %v", name, b.label, err))
	}
	return nil
}

// dropBackend removes the registration of name made in slot, or gives
// the name back to prev when prev's slot still serves.
func (m *Manager) dropBackend(name string, slot Slot, prev *backend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.backends[name]
	if !ok || cur.slot != slot {
		return
	}
	if prev != nil && prev.slot.Live() {
		m.backends[name] = prev
		return
	}
	delete(m.backends, name)
}

// Backends lists the registered backend names, sorted.
func (m *Manager) Backends() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.backendNamesLocked()
}

func (m *Manager) backendNamesLocked() []string {
	names := make([]string, 0, len(m.backends))
	for n := range m.backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// pickLocked is the backend an Open names: by name, or the only one.
func (m *Manager) pickLocked(name string) (*backend, error) {
	names := m.backendNamesLocked()
	if name == "" {
		switch len(names) {
		case 1:
			return m.backends[names[0]], nil
		case 0:
			return nil, terminals.Errorf(terminals.ErrNoBackend, "no terminal backend is registered (compose one, such as terminal-bash)")
		}
		return nil, terminals.Errorf(terminals.ErrNoBackend, fmt.Sprintf("several terminal backends are registered (%s): name one", strings.Join(names, ", ")))
	}
	if b, ok := m.backends[name]; ok {
		return b, nil
	}
	have := "none is"
	if len(names) > 0 {
		have = strings.Join(names, ", ") + " are"
	}
	return nil, terminals.Errorf(terminals.ErrNoBackend, fmt.Sprintf("no terminal backend %q is registered (%s)", name, have))
}
