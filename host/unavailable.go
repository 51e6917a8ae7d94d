package host

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/registry"
)

// A tool stays listed while its plugin, or a provider its plugin needs, is
// down (restarting, failed, crash-looping, waiting for a provider): the
// registry keeps it Down (host/toolset) for as long as the entry
// declares it, and a call gets an *UnavailableError that says which plugin
// is down, why, and how it comes back. An agent's tool list does not
// shrink because a process failed; it changes when the composition does.

// UnavailableError is a call's answer while its tool cannot be served:
// its plugin, or a provider it needs, is not serving. Error is the one
// sentence the model and the user read.
type UnavailableError struct {
	Tool string
	// Plugin is the entry id of the plugin that is down (the tool's own,
	// or a provider's); "" when no plugin provides a key the tool needs.
	Plugin string
	Msg    string
}

func (e *UnavailableError) Error() string { return e.Msg }

// wantsTool reports whether entry plugin of the running composition still
// declares tool name: the registry keeps such a tool listed while down.
func (h *Host) wantsTool(plugin, name string) bool {
	if h.closing.Load() {
		return false
	}
	h.mu.Lock()
	en := h.byID[plugin]
	h.mu.Unlock()
	return en != nil && slices.Contains(en.toolNames(), name)
}

// providerOf is the enabled entry whose plugin provides key, if any.
func (h *Host) providerOf(key string) *entry {
	for _, en := range h.entryList() {
		if e, _, desc := en.view(); !e.Disabled && desc != nil && lifecycle.Provides(desc, key) {
			return en
		}
	}
	return nil
}

// culprit finds what keeps en from serving: en itself, or a provider of a
// key it needs that is not serving, reached through keys (what en needs,
// then what that provider needs...). A nil entry with keys means no
// enabled plugin provides the last key; nil and no keys, that everything
// serves.
func (h *Host) culprit(en *entry, seen map[*entry]bool) (*entry, []string) {
	if seen[en] {
		return nil, nil
	}
	seen[en] = true
	state, _ := en.state()
	_, _, desc := en.view()
	switch state {
	case registry.Active.String(), registry.Pending.String():
	default:
		return en, nil // failed, restarting, unhealthy, loading...
	}
	if desc != nil {
		for _, in := range desc.Inject {
			if in.Optional {
				continue
			}
			_, _, bound := h.reg.Lookup(in.Key)
			p := h.providerOf(in.Key)
			if p == nil {
				if !bound {
					return nil, []string{in.Key}
				}
				continue // the host's own key
			}
			if c, keys := h.culprit(p, seen); c != nil || len(keys) > 0 {
				return c, append([]string{in.Key}, keys...)
			}
			if !bound {
				return p, []string{in.Key}
			}
		}
	}
	if state == registry.Pending.String() {
		return en, nil
	}
	return nil, nil
}

// unavailable is the answer to a call of tool, served by entry plugin,
// that no process can serve now.
func (h *Host) unavailable(tool, plugin string) *UnavailableError {
	ue := &UnavailableError{Tool: tool, Plugin: plugin}
	en := h.find(plugin)
	if en == nil {
		ue.Msg = fmt.Sprintf("The %s tool is unavailable: its plugin %q is no longer in the composition.", tool, plugin)
		return ue
	}
	c, keys := h.culprit(en, map[*entry]bool{})
	if c == nil && len(keys) == 0 {
		c = en // it serves again by now, or is between states
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The %s tool is unavailable: ", tool)
	if len(keys) > 0 {
		fmt.Fprintf(&b, "it needs ctx.%s", keys[0])
		for _, k := range keys[1:] {
			fmt.Fprintf(&b, ", which needs ctx.%s", k)
		}
		if c == nil {
			ue.Plugin = ""
			b.WriteString(", and no enabled plugin of the composition provides it; the composition needs one that does.")
			ue.Msg = b.String()
			return ue
		}
		b.WriteString(", whose plugin ")
	} else {
		b.WriteString("its plugin ")
	}
	ue.Plugin = c.id
	fmt.Fprintf(&b, "%s ", c.label())
	state, reason := c.state()
	c.mu.Lock()
	lastErr := c.sup.lastErr
	c.mu.Unlock()
	switch state {
	case "restarting":
		b.WriteString("crashed and is restarting; try again in a moment.")
		return done(ue, &b)
	case "unhealthy":
		fmt.Fprintf(&b, "is not answering (%s) and is restarted if it stays so; try again in a moment.", reason)
		return done(ue, &b)
	case registry.Failed.String(), "":
	default:
		// Loading, unloading, pending or serving again: it is on its way.
		fmt.Fprintf(&b, "is %s", state)
		if reason != "" {
			fmt.Fprintf(&b, " (%s)", reason)
		}
		b.WriteString("; try again in a moment.")
		return done(ue, &b)
	}
	if state == "" {
		b.WriteString("is not loaded")
	} else {
		b.WriteString("has failed")
	}
	if reason != "" {
		fmt.Fprintf(&b, ": %s", strings.TrimSuffix(reason, "."))
	}
	b.WriteString(".")
	if lastErr != "" && !strings.Contains(reason, lastErr) {
		fmt.Fprintf(&b, " Its last error: %s.", strings.TrimSuffix(cutRunes(lastErr, 300), "."))
	}
	if !strings.Contains(reason, "dsh reload") {
		fmt.Fprintf(&b, " Once the cause is fixed (the plugin, or the composition), `dsh reload %s` brings it back.", c.id)
	}
	return done(ue, &b)
}

func done(ue *UnavailableError, b *strings.Builder) *UnavailableError {
	ue.Msg = b.String()
	return ue
}

// cutRunes is s cut to at most n runes, marked when cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
