package composition

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dshrun/dsh/internal/schemacheck"
)

// ValidateConfig validates cfg, the effective config of entry e (settings
// namespace ns, when the plugin reads one, overlaid with the entry's own
// config; merging is the caller's job), against the JSON Schema document
// schemaJSON; an empty schema accepts anything. c may be nil (then nothing
// came from settings).
//
// Each violation is an *Error for e at the value at fault: in the entry's
// config, or in settings.<ns> when the value came from there (an unknown
// key at that key, a map that lacks a key at the map's key). What cannot
// be placed is at e.ConfigPos. They come joined, one per violation.
func (c *Composition) ValidateConfig(e Entry, ns string, cfg map[string]any, schemaJSON []byte) error {
	pos := e.ConfigPos
	if pos.Line == 0 {
		pos = e.Pos
	}
	fail := func(at Pos, format string, args ...any) *Error {
		return &Error{Pos: at, ID: e.ID, Msg: fmt.Sprintf(format, args...)}
	}
	sch, err := schemacheck.Compile(schemaJSON)
	if err != nil {
		return fail(pos, "the plugin's config %v", err)
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	// Through JSON, as the plugin will see it.
	b, err := json.Marshal(cfg)
	if err != nil {
		return fail(pos, "config cannot be written as JSON: %v", err)
	}
	vs, err := sch.Validate(b)
	if err != nil {
		return fail(pos, "config: %v", err)
	}
	var settings *place
	if c != nil && ns != "" {
		settings = c.settingsPlace.field(ns)
	}
	loc := locator{config: e.place.field("config"), settings: settings, ns: ns, fallback: pos}
	var errs []*Error
	for _, v := range vs {
		if v.Property != "" {
			// At the key whose name is at fault.
			at, in := loc.at(v.Pointer+"/"+escapePointer(v.Property), true)
			errs = append(errs, fail(at, "%s: %s", where(in, v.Pointer), v.Message))
			continue
		}
		if len(v.Unknown) == 0 {
			at, in := loc.at(v.Pointer, false)
			errs = append(errs, fail(at, "%s: %s", where(in, v.Pointer), v.Message))
			continue
		}
		allowed := ""
		if names := propertiesAt(schemaJSON, v.Pointer); len(names) > 0 {
			allowed = " (allowed: " + strings.Join(names, ", ") + ")"
		}
		for _, name := range v.Unknown {
			// At the key, in the map that has it.
			at, in := loc.at(v.Pointer+"/"+escapePointer(name), true)
			errs = append(errs, fail(at, "%s: unknown key %q%s", where(in, v.Pointer), name, allowed))
		}
	}
	return joinErrors(errs)
}

// locator places the values of an effective config: the entry's config
// first (it overrides), then the settings namespace.
type locator struct {
	config, settings *place
	ns               string
	fallback         Pos
}

// at is where the value at pointer is written (its key with key, or when
// it is a map or list: the line that names it), and in which tree:
// "config" or "settings.<ns>".
func (l locator) at(pointer string, key bool) (Pos, string) {
	if pointer == "" && l.config == nil {
		// The whole config: the entry's, even when settings give some.
		return l.fallback, "config"
	}
	for _, src := range []struct {
		pl *place
		in string
	}{{l.config, "config"}, {l.settings, "settings." + l.ns}} {
		if pl, ok := src.pl.find(pointer); ok {
			if key || pl.fields != nil || pl.items != nil {
				return pl.key, src.in
			}
			return pl.at, src.in
		}
	}
	return l.fallback, "config"
}

// where names a value for errors: "config /a/b", "settings.shell".
func where(in, pointer string) string {
	if pointer == "" {
		return in
	}
	return in + " " + pointer
}

// propertiesAt lists the properties schemaJSON declares for the object at
// pointer, following properties and items; nil when it cannot tell.
func propertiesAt(schemaJSON []byte, pointer string) []string {
	var s map[string]any
	if json.Unmarshal(schemaJSON, &s) != nil {
		return nil
	}
	if pointer != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
			props, _ := s["properties"].(map[string]any)
			next, ok := props[tok].(map[string]any)
			if !ok {
				if _, err := strconv.Atoi(tok); err == nil {
					next, ok = s["items"].(map[string]any)
				}
			}
			if !ok {
				return nil
			}
			s = next
		}
	}
	props, _ := s["properties"].(map[string]any)
	var names []string
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
