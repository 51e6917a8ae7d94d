package composition

import (
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/dshrun/dsh/host/credential"
)

// masked replaces secret values in Masked.
const masked = "********"

// taint records, for a value tree, the variables each string was
// interpolated from. A nil *taint means "nothing below".
type taint struct {
	vars   []string
	fields map[string]*taint
	items  []*taint
}

func (t *taint) field(name string) *taint {
	if t == nil {
		return nil
	}
	return t.fields[name]
}

func (t *taint) item(i int) *taint {
	if t == nil || i >= len(t.items) {
		return nil
	}
	return t.items[i]
}

// taintOf builds the taint of n's value as the decoder sees it (aliases
// followed, merges applied).
func (p *parser) taintOf(n *yaml.Node) *taint {
	memo := map[*yaml.Node]*taint{}
	var of func(n *yaml.Node) *taint
	of = func(n *yaml.Node) *taint {
		n = resolve(n)
		if n == nil {
			return nil
		}
		if t, ok := memo[n]; ok {
			return t
		}
		var t *taint
		switch n.Kind {
		case yaml.ScalarNode:
			if vs := p.vars[n]; len(vs) > 0 {
				t = &taint{vars: vs}
			}
		case yaml.MappingNode:
			for _, kp := range pairs(n) {
				if ft := of(kp.val); ft != nil {
					if t == nil {
						t = &taint{fields: map[string]*taint{}}
					}
					t.fields[kp.name] = ft
				}
			}
		case yaml.SequenceNode:
			items := make([]*taint, len(n.Content))
			some := false
			for i, c := range n.Content {
				items[i] = of(c)
				some = some || items[i] != nil
			}
			if some {
				t = &taint{items: items}
			}
		}
		memo[n] = t
		return t
	}
	return of(n)
}

// Masked returns the composition as a plain map (host, settings, and plugins
// with id, name or path, sha256, config and disabled), ready to print as YAML
// or JSON. What the credential scrub withholds from commands is masked, by
// the same rule (package credential, with host.scrub's additions): every
// value under a key that names a credential, every string interpolated from
// a variable whose name does, and every string holding a credential value
// (a URL with user-info, a webhook URL) is replaced by "********"; so is
// every clients.tokens token, whatever its key or variable is called. The
// composition is not modified.
func (c *Composition) Masked() map[string]any {
	maskValue := masker{credential.NewRule(c.Host.Scrub.Extra, c.Host.Scrub.Keep)}.value
	settings := map[string]any{}
	for ns, m := range c.Settings {
		settings[ns] = maskValue(ns, m, c.settingsTaint.field(ns))
	}
	plugins := make([]any, 0, len(c.Plugins))
	for _, e := range c.Plugins {
		pm := map[string]any{
			"id":       maskValue("", e.ID, e.taint.field("id")),
			"disabled": e.Disabled,
		}
		if e.Name != "" {
			pm["name"] = maskValue("", e.Name, e.taint.field("name"))
		}
		if e.Path != "" {
			pm["path"] = maskValue("", e.Path, e.taint.field("path"))
		}
		if e.SHA256 != "" {
			pm["sha256"] = maskValue("", e.SHA256, e.taint.field("sha256"))
		}
		if e.Config != nil {
			pm["config"] = maskValue("", e.Config, e.taint.field("config"))
		}
		plugins = append(plugins, pm)
	}
	host := map[string]any{
		"startTimeout": c.Host.StartTimeout.String(),
		"stopTimeout":  c.Host.StopTimeout.String(),
	}
	if sc := c.Host.Scrub; sc.Extra != nil || sc.Keep != nil {
		// Names, not values: nothing here to mask.
		scrub := map[string]any{}
		if sc.Extra != nil {
			scrub["extra"] = sc.Extra
		}
		if sc.Keep != nil {
			scrub["keep"] = sc.Keep
		}
		host["scrub"] = scrub
	}
	if sp := c.Host.Spill; sp != (Spill{}) {
		spill := map[string]any{}
		if sp.Total != 0 {
			spill["total"] = sp.Total
		}
		if sp.PerOwner != 0 {
			spill["perOwner"] = sp.PerOwner
		}
		host["spill"] = spill
	}
	out := map[string]any{
		"host":     host,
		"settings": settings,
		"plugins":  plugins,
	}
	if cl := c.Clients; cl != nil {
		clients := map[string]any{"owners": cl.Owners}
		if cl.ReleaseGrace != 0 {
			clients["releaseGrace"] = cl.ReleaseGrace.String()
		}
		if cl.ResumeWithin != 0 {
			clients["resumeWithin"] = cl.ResumeWithin.String()
		}
		if cl.Tokens != nil {
			tokens := make([]any, len(cl.Tokens))
			for i, tk := range cl.Tokens {
				// A bearer token is a secret by what it is, not by its name.
				tokens[i] = map[string]any{"name": maskValue("", tk.Name, tk.taint.field("name")), "token": masked}
			}
			clients["tokens"] = tokens
		}
		out["clients"] = clients
	}
	if sb := c.Sandbox; sb != nil {
		// Paths, resolved: what the policy really is.
		out["sandbox"] = map[string]any{
			"defaultMode":    sb.DefaultMode,
			"workspaceRoot":  sb.WorkspaceRoot,
			"writableRoots":  orEmpty(sb.WritableRoots),
			"cacheRoots":     orEmpty(sb.CacheRoots),
			"network":        sb.Network,
			"protectedPaths": orEmpty(sb.ProtectedPaths),
			"unixSockets":    orEmpty(sb.UnixSockets),
			"runner":         sb.Runner,
		}
		if r := sb.NetworkRules; r != nil {
			out["sandbox"].(map[string]any)["network"] = map[string]any{
				"allow": orEmpty(r.Allow), "deny": orEmpty(r.Deny), "mode": r.Mode, "hosts": r.Hosts,
			}
		}
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// masker masks by a credential rule.
type masker struct{ rule *credential.Rule }

// value copies v, masking as Masked says; key is v's key ("" for none).
func (m masker) value(key string, v any, t *taint) any {
	if key != "" && m.rule.SecretName(key) {
		return masked
	}
	if s, ok := v.(string); ok && credential.Value(s) {
		return masked // a URL that carries its credential
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = m.value(k, x, t.field(k))
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = m.value("", x, t.item(i))
		}
		return out
	case string:
		if t != nil && slices.ContainsFunc(t.vars, m.rule.SecretName) {
			return masked
		}
	}
	return v
}
