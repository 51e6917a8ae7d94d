package toolset

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dshrun/dsh/core/tools"
)

// Interceptor is a plugin's interception of tool calls.
type Interceptor[S Slot] struct {
	Plugin, Label string
	Slot          S
	Before, After bool
	Timeout       time.Duration

	patterns []*regexp.Regexp // nil entry: every tool
	aliases  map[string]string
	prefix   string
}

// Alias is tool's name as the interceptor knows it.
func (ic *Interceptor[S]) Alias(tool string) string {
	if a, ok := ic.aliases[tool]; ok {
		return a
	}
	return ic.prefix + tool
}

// Covers reports whether the interceptor intercepts calls of tool.
func (ic *Interceptor[S]) Covers(tool string) bool {
	alias := ic.Alias(tool)
	for _, p := range ic.patterns {
		if p == nil || p.MatchString(alias) {
			return true
		}
	}
	return false
}

// The bounds of an interceptor's answer.
const (
	DefaultInterceptTimeout = 60 * time.Second
	MaxInterceptTimeout     = 10 * time.Minute
)

// Interceptors are the interceptors of calls of tool, before or after
// them, in the order of their plugins' ids.
func (r *Registry[S]) Interceptors(tool string, after bool) []*Interceptor[S] {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Interceptor[S]
	for _, ic := range r.icepts {
		if (after && ic.After || !after && ic.Before) && ic.Covers(tool) {
			out = append(out, ic)
		}
	}
	slices.SortFunc(out, func(a, b *Interceptor[S]) int { return strings.Compare(a.Plugin, b.Plugin) })
	return out
}

func (p *registrar[S]) Intercept(_ context.Context, in *tools.Interception) error {
	slot, _, ok := p.c.Serving()
	if !ok {
		return tools.CannotRegister("this caller cannot serve interceptor calls")
	}
	if len(in.Patterns) == 0 {
		p.r.setInterceptor(p.c.ID(), slot, nil)
		return nil
	}
	ic := &Interceptor[S]{Plugin: p.c.ID(), Label: p.c.Label(), Slot: slot, Before: in.Before, After: in.After,
		Timeout: DefaultInterceptTimeout, aliases: in.Aliases, prefix: in.AliasPrefix}
	if in.TimeoutMs < 0 || in.TimeoutMs > MaxInterceptTimeout.Milliseconds() {
		return tools.Invalid(fmt.Sprintf("an interception's timeout is 0 to %d ms (asked %d)", MaxInterceptTimeout.Milliseconds(), in.TimeoutMs))
	}
	if in.TimeoutMs > 0 {
		ic.Timeout = time.Duration(in.TimeoutMs) * time.Millisecond
	}
	for _, pat := range in.Patterns {
		if pat == "" || pat == "*" {
			ic.patterns = append(ic.patterns, nil)
			continue
		}
		re, err := regexp.Compile(`^(?:` + pat + `)$`)
		if err != nil {
			return tools.Invalid(fmt.Sprintf("interception pattern %q: %v", pat, err))
		}
		ic.patterns = append(ic.patterns, re)
	}
	prev := p.r.setInterceptor(p.c.ID(), slot, ic)
	if prev != nil && prev.Slot == slot {
		return nil // the scope's effect that removes it is there already
	}
	// An effect of the caller's scope, given back to the one it took over
	// from should this scope go first (a reload that failed).
	drop := func() { p.r.dropInterceptor(p.c.ID(), slot, prev) }
	if err := p.c.AddEffect("tool interception", func(context.Context) error {
		drop()
		return nil
	}); err != nil {
		drop()
		return tools.CannotRegister(fmt.Sprintf("interception: %v", err))
	}
	return nil
}

// setInterceptor sets (nil: removes) plugin's interceptor, returning the
// one it replaced.
func (r *Registry[S]) setInterceptor(plugin string, slot S, ic *Interceptor[S]) *Interceptor[S] {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.icepts[plugin]
	if ic == nil {
		if prev != nil && prev.Slot == slot {
			delete(r.icepts, plugin)
		}
		return prev
	}
	r.icepts[plugin] = ic
	return prev
}

// dropInterceptor removes plugin's interceptor set in slot, or gives
// prev back when prev's slot still serves.
func (r *Registry[S]) dropInterceptor(plugin string, slot S, prev *Interceptor[S]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.icepts[plugin]
	if !ok || cur.Slot != slot {
		return
	}
	if prev != nil && prev.Slot.Live() {
		r.icepts[plugin] = prev
		return
	}
	delete(r.icepts, plugin)
}
