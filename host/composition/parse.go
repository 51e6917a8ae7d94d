package composition

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	kyaml "github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"go.yaml.in/yaml/v3"
)

var (
	idRE        = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	shortNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	scopeRE     = regexp.MustCompile(`^@[a-z0-9][a-z0-9._~-]*$`)
	sha256RE    = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envPartRE   = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

var (
	topKeys   = []string{"host", "settings", "sandbox", "approval", "clients", "plugins"}
	hostKeys  = []string{"startTimeout", "stopTimeout", "callTimeout", "pingInterval", "pingTimeout", "restartWait", "scrub", "spill"}
	scrubKeys = []string{"extra", "keep"}
	entryKeys = []string{"id", "name", "path", "sha256", "config", "disabled"}
)

// parser holds the state of one read.
type parser struct {
	file   string // as shown in positions
	lookup func(string) (string, bool)
	errs   []located
	vars   map[*yaml.Node][]string // interpolated scalars -> variables used
	failed map[*yaml.Node]bool     // scalars whose value is not usable
}

type located struct {
	err  *Error
	node *yaml.Node // where it was found, nil when not from a node
}

func (p *parser) pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: p.file, Line: 1, Column: 1}
	}
	return Pos{File: p.file, Line: n.Line, Column: n.Column}
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	p.entryErrorf(n, "", format, args...)
}

func (p *parser) entryErrorf(n *yaml.Node, id, format string, args ...any) {
	p.errs = append(p.errs, located{
		err:  &Error{Pos: p.pos(n), ID: id, Msg: fmt.Sprintf(format, args...)},
		node: n,
	})
}

// usable reports whether n's value may be checked: it is not an interpolated
// value that already failed (its problem is reported).
func (p *parser) usable(n *yaml.Node) bool { return !p.failed[resolve(n)] }

func (p *parser) result() error {
	errs := make([]*Error, len(p.errs))
	for i, l := range p.errs {
		errs[i] = l.err
	}
	return joinErrors(errs)
}

func parse(file, abs string, data []byte, lookup func(string) (string, bool)) (*Composition, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	p := &parser{
		file:   file,
		lookup: lookup,
		vars:   map[*yaml.Node][]string{},
		failed: map[*yaml.Node]bool{},
	}

	// The node tree: positions, and the place to interpolate.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, syntaxError(file, data, err)
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, syntaxError(file, data, err)
		}
		if len(next.Content) > 0 && !isNull(next.Content[0]) {
			return nil, &Error{Pos: Pos{File: file, Line: next.Line, Column: next.Column},
				Msg: "a composition is a single YAML document; found another one here"}
		}
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if root != nil && isNull(root) {
		root = nil // an empty document
	}
	if root != nil && root.Kind != yaml.MappingNode {
		return nil, &Error{Pos: p.pos(root),
			Msg: fmt.Sprintf("a composition is a map with keys %s; this is a %s", strings.Join(topKeys, ", "), kindName(root))}
	}
	if root != nil && !p.prepare(root) {
		return nil, p.result()
	}

	// The values: koanf reads the interpolated tree.
	raw := map[string]any{}
	if root != nil {
		text, err := yaml.Marshal(root)
		if err == nil {
			k := koanf.New(".")
			if err = k.Load(rawbytes.Provider(text), kyaml.Parser()); err == nil {
				raw = k.Raw()
			}
		}
		if err != nil {
			// Not expected once prepare has passed: the lines in err are
			// those of the re-encoded text, so only the message is kept.
			msg := regexp.MustCompile(`line \d+: `).ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: "), "")
			p.errorf(root, "cannot read the composition: %s", msg)
			return nil, p.result()
		}
		normalizeMap(raw)
	}

	c := &Composition{
		File:     abs,
		Dir:      filepath.Dir(abs),
		Host:     HostSettings{StartTimeout: defaultStartTimeout, StopTimeout: defaultStopTimeout},
		Settings: map[string]map[string]any{},
	}
	var entryNodes []*yaml.Node
	var rootTaint *taint
	var rootPlace *place
	if root != nil {
		rootTaint = p.taintOf(root)
		rootPlace = p.placeOf(root)
	}
	sawPlugins := false
	for _, kp := range pairs(root) {
		switch kp.name {
		case "host":
			p.host(c, kp, raw["host"])
		case "sandbox":
			p.sandbox(c, kp, raw["sandbox"])
		case "approval":
			p.approval(c, kp, raw["approval"])
		case "clients":
			p.clients(c, kp, raw["clients"])
		case "settings":
			p.settings(c, kp, raw["settings"])
			c.settingsTaint = rootTaint.field("settings")
			c.settingsPlace = rootPlace.field("settings")
		case "plugins":
			sawPlugins = true
			entryNodes = p.plugins(c, kp, raw["plugins"], rootTaint.field("plugins"), rootPlace.field("plugins"))
		default:
			p.errorf(kp.key, "unknown key %q (allowed: %s)", kp.name, strings.Join(topKeys, ", "))
		}
	}
	if !sawPlugins {
		p.errorf(root, `missing required key "plugins" (a list of plugin entries, possibly empty: "plugins: []")`)
	}
	p.checkIDs(c.Plugins, entryNodes)
	p.attribute(c.Plugins, entryNodes)
	if len(p.errs) > 0 {
		return nil, p.result()
	}
	if c.Plugins == nil {
		c.Plugins = []Entry{}
	}
	return c, nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// normalizeMap makes every nested map a map[string]any, the way koanf does
// for the maps it sees, down to maps inside lists of lists.
func normalizeMap(m map[string]any) {
	for k, v := range m {
		m[k] = normalize(v)
	}
}

func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		normalizeMap(v)
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[fmt.Sprintf("%v", k)] = normalize(x)
		}
		return out
	case []any:
		for i, x := range v {
			v[i] = normalize(x)
		}
		return v
	}
	return v
}

// describe names the type of a decoded value, with the value for scalars.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case int, int64, uint64, float64:
		return fmt.Sprintf("the number %v", v)
	}
	return fmt.Sprintf("%v (%T)", v, v)
}

func (p *parser) host(c *Composition, kp pair, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil {
			p.errorf(kp.val, "host must be a map, got %s", describe(v))
		}
		return
	}
	for _, hp := range pairs(kp.val) {
		var dst *time.Duration
		switch hp.name {
		case "scrub":
			p.scrub(c, hp, m["scrub"])
			continue
		case "spill":
			p.spill(c, hp, m["spill"])
			continue
		case "startTimeout":
			dst = &c.Host.StartTimeout
		case "stopTimeout":
			dst = &c.Host.StopTimeout
		case "callTimeout":
			dst = &c.Host.CallTimeout
		case "pingInterval":
			dst = &c.Host.PingInterval
		case "pingTimeout":
			dst = &c.Host.PingTimeout
		case "restartWait":
			dst = &c.Host.RestartWait
		default:
			p.errorf(hp.key, "unknown host key %q (allowed: %s)", hp.name, strings.Join(hostKeys, ", "))
			continue
		}
		if !p.usable(hp.val) || m[hp.name] == nil {
			continue
		}
		s, isStr := m[hp.name].(string)
		d, err := time.ParseDuration(s)
		if !isStr || err != nil || d <= 0 {
			p.errorf(hp.val, "bad duration for %s: got %s, want a positive Go duration such as \"10s\" or \"1m30s\"", hp.name, describe(m[hp.name]))
			continue
		}
		*dst = d
	}
}

// scrub reads host.scrub: lists of variable-name substrings to withhold
// (extra) and of exact names to pass on (keep).
func (p *parser) scrub(c *Composition, kp pair, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil && p.usable(kp.val) {
			p.errorf(kp.val, "host.scrub must be a map with extra and keep, got %s", describe(v))
		}
		return
	}
	for _, sp := range pairs(kp.val) {
		var dst *[]string
		var valid *regexp.Regexp
		var what string
		switch sp.name {
		case "extra":
			dst, valid, what = &c.Host.Scrub.Extra, envPartRE, "a part of a variable name (letters, digits, _)"
		case "keep":
			dst, valid, what = &c.Host.Scrub.Keep, envNameRE, "a variable name"
		default:
			p.errorf(sp.key, "unknown host.scrub key %q (allowed: %s)", sp.name, strings.Join(scrubKeys, ", "))
			continue
		}
		list, ok := m[sp.name].([]any)
		seq := resolve(sp.val)
		if !ok || seq == nil || seq.Kind != yaml.SequenceNode || len(seq.Content) != len(list) {
			if m[sp.name] != nil && p.usable(sp.val) {
				p.errorf(sp.val, "host.scrub.%s must be a list of strings, got %s", sp.name, describe(m[sp.name]))
			}
			continue
		}
		for i, item := range list {
			n := seq.Content[i]
			if !p.usable(n) {
				continue
			}
			s, isStr := item.(string)
			switch {
			case !isStr || !valid.MatchString(s):
				p.errorf(n, "host.scrub.%s: want %s, got %s", sp.name, what, describe(item))
			case sp.name == "keep" && strings.HasPrefix(s, "DSH_"):
				p.errorf(n, "host.scrub.keep: %s is in the DSH_ namespace, which commands get only from ctx.shellEnv, never from the host's environment", s)
			default:
				*dst = append(*dst, s)
			}
		}
	}
}

func (p *parser) settings(c *Composition, kp pair, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil {
			p.errorf(kp.val, "settings must be a map of namespaces (name -> map), got %s", describe(v))
		}
		return
	}
	for _, sp := range pairs(kp.val) {
		switch ns := m[sp.name].(type) {
		case nil:
			c.Settings[sp.name] = map[string]any{}
		case map[string]any:
			c.Settings[sp.name] = ns
		default:
			p.errorf(sp.val, "settings namespace %q must be a map, got %s", sp.name, describe(ns))
		}
	}
}

// plugins reads the entries; it returns the node of each entry in
// c.Plugins, for later checks.
func (p *parser) plugins(c *Composition, kp pair, v any, t *taint, pl *place) []*yaml.Node {
	c.Plugins = []Entry{}
	list, ok := v.([]any)
	seq := resolve(kp.val)
	if !ok || seq == nil || seq.Kind != yaml.SequenceNode || len(seq.Content) != len(list) {
		if v != nil {
			p.errorf(kp.val, "plugins must be a list of entries, got %s", describe(v))
		}
		return nil
	}
	var nodes []*yaml.Node
	for i, item := range list {
		n := seq.Content[i]
		m, ok := item.(map[string]any)
		if !ok || resolve(n).Kind != yaml.MappingNode {
			p.errorf(n, "plugins entry %d must be a map with name or path, got %s", i+1, describe(item))
			continue
		}
		// Kept even when it has problems (the composition is then not
		// returned), for the id checks and the attribution of errors.
		e := p.entry(n, m)
		e.taint = t.item(i)
		e.place = pl.item(i)
		c.Plugins = append(c.Plugins, e)
		nodes = append(nodes, n)
	}
	return nodes
}

// entry reads one entry, reporting its problems.
func (p *parser) entry(n *yaml.Node, m map[string]any) Entry {
	e := Entry{Pos: p.pos(n)}
	e.ConfigPos = e.Pos
	ps := pairs(n)
	field := map[string]pair{}
	for _, kp := range ps {
		field[kp.name] = kp
	}
	str := func(key string) (string, bool) {
		s, ok := m[key].(string)
		return s, ok && p.usable(field[key].val)
	}

	// The label of errors: the id, as written or as it would default.
	name, hasName := str("name")
	short, nameErr := shortName(name)
	path, hasPath := str("path")
	derived := ""
	switch {
	case hasName && nameErr == nil:
		derived = short
	case hasPath && path != "":
		derived = idFromPath(path)
	}
	id, hasID := str("id")
	label := id
	if !idRE.MatchString(label) {
		label = derived
	}
	if !idRE.MatchString(label) {
		label = ""
	}
	errorf := func(at *yaml.Node, format string, args ...any) {
		p.entryErrorf(at, label, format, args...)
	}
	mustString := func(key string) bool {
		v := m[key]
		if _, isStr := v.(string); !isStr && v != nil && p.usable(field[key].val) {
			errorf(field[key].val, "%s must be a string, got %s", key, describe(v))
			return false
		}
		return true
	}

	for _, kp := range ps {
		if !contains(entryKeys, kp.name) {
			errorf(kp.key, "unknown key %q (allowed: %s)", kp.name, strings.Join(entryKeys, ", "))
		}
	}

	// name or path
	for _, key := range []string{"name", "path"} {
		mustString(key)
	}
	switch {
	case m["name"] != nil && m["path"] != nil:
		errorf(n, "both name and path are set; an entry has exactly one")
	case m["name"] == nil && m["path"] == nil:
		errorf(n, "neither name nor path is set; an entry has exactly one")
	case hasName:
		if nameErr != nil {
			errorf(field["name"].val, "%v", nameErr)
		}
		e.Name = short
	case hasPath:
		if path == "" {
			errorf(field["path"].val, "path must not be empty")
		}
		e.Path = path
	}

	// id
	if mustString("id") {
		switch {
		case hasID:
			if !idRE.MatchString(id) {
				errorf(field["id"].val, "bad id %q: an id matches %s", id, idRE)
			}
			e.ID = id
		case m["id"] == nil && derived != "":
			if !idRE.MatchString(derived) {
				errorf(n, "cannot use %q as the default id (an id matches %s); set id", derived, idRE)
			}
			e.ID = derived
		}
	}

	// sha256
	if mustString("sha256") {
		// An empty pin is no pin: sha256: ${PIN:-} leaves it optional.
		if s, ok := str("sha256"); ok && s != "" {
			if !sha256RE.MatchString(s) {
				errorf(field["sha256"].val, "sha256 must be 64 hex digits, got %q (%d characters)", s, len(s))
			}
			e.SHA256 = strings.ToLower(s)
		}
	}

	// disabled
	switch d := m["disabled"].(type) {
	case nil:
	case bool:
		e.Disabled = d
	default:
		if p.usable(field["disabled"].val) {
			errorf(field["disabled"].val, "disabled must be true or false, got %s", describe(d))
		}
	}

	// config
	if kp, ok := field["config"]; ok {
		e.ConfigPos = p.pos(kp.key)
		switch cfg := m["config"].(type) {
		case nil:
		case map[string]any:
			e.Config = cfg
		default:
			errorf(kp.val, "config must be a map, got %s", describe(cfg))
		}
	}
	return e
}

// shortName returns the short name of a plugin written as name, dsh-name or
// @scope/dsh-name.
func shortName(name string) (string, error) {
	s := name
	if strings.HasPrefix(s, "@") {
		scope, rest, ok := strings.Cut(s, "/")
		if !ok || !scopeRE.MatchString(scope) || !strings.HasPrefix(rest, "dsh-") {
			return "", fmt.Errorf("bad name %q: a scoped name is written @scope/dsh-<name>", name)
		}
		s = rest
	}
	s = strings.TrimPrefix(s, "dsh-")
	if !shortNameRE.MatchString(s) {
		return "", fmt.Errorf("bad name %q: want <name>, dsh-<name> or @scope/dsh-<name>, <name> matching %s", name, shortNameRE)
	}
	return s, nil
}

// idFromPath is the default id of a path entry: the file's base name
// without a leading "dsh-" or a trailing ".exe".
func idFromPath(path string) string {
	base := filepath.Base(filepath.FromSlash(path))
	base = strings.TrimSuffix(base, ".exe")
	return strings.TrimPrefix(base, "dsh-")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkIDs reports ids used twice, naming both lines.
func (p *parser) checkIDs(entries []Entry, nodes []*yaml.Node) {
	first := map[string]Entry{}
	for i, e := range entries {
		if !idRE.MatchString(e.ID) {
			continue
		}
		f, dup := first[e.ID]
		if !dup {
			first[e.ID] = e
			continue
		}
		at := nodes[i]
		for _, kp := range pairs(at) {
			if kp.name == "id" {
				at = kp.val
			}
		}
		p.entryErrorf(at, e.ID, "duplicate id %q (first at line %d, again at line %d)", e.ID, f.Pos.Line, p.pos(at).Line)
	}
}

// attribute gives the errors found inside an entry (while interpolating,
// say) that entry's id.
func (p *parser) attribute(entries []Entry, nodes []*yaml.Node) {
	owner := map[*yaml.Node]string{}
	for i, n := range nodes {
		id := entries[i].ID
		if !idRE.MatchString(id) {
			continue
		}
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			if n == nil {
				return
			}
			if _, seen := owner[n]; seen {
				return
			}
			owner[n] = id
			walk(n.Alias)
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(n)
	}
	for _, l := range p.errs {
		if l.err.ID == "" && l.node != nil {
			l.err.ID = owner[l.node]
		}
	}
}
