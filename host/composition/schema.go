package composition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

const schemaURL = "urn:dsh:plugin-config-schema"

// ValidateConfig validates cfg, the config of entry e (merging in settings is
// the caller's job), against the JSON Schema document schemaJSON; an empty
// schema accepts anything. Each violation is an *Error at e.ConfigPos (e.Pos
// when unset) naming its JSON pointer in cfg; they come joined.
func ValidateConfig(e Entry, cfg map[string]any, schemaJSON []byte) error {
	if len(bytes.TrimSpace(schemaJSON)) == 0 {
		return nil
	}
	pos := e.ConfigPos
	if pos.Line == 0 {
		pos = e.Pos
	}
	fail := func(format string, args ...any) *Error {
		return &Error{Pos: pos, ID: e.ID, Msg: fmt.Sprintf(format, args...)}
	}

	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return fail("the plugin's config schema is not valid JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return fail("the plugin's config schema is invalid: %v", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return fail("the plugin's config schema is invalid: %v", err)
	}

	if cfg == nil {
		cfg = map[string]any{}
	}
	// Through JSON, as the plugin will see it.
	b, err := json.Marshal(cfg)
	if err != nil {
		return fail("config cannot be written as JSON: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fail("config cannot be read back from JSON: %v", err)
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fail("config: %v", err)
	}
	type violation struct{ ptr, msg string }
	var vs []violation
	printer := message.NewPrinter(language.English)
	var leaves func(v *jsonschema.ValidationError)
	leaves = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			vs = append(vs, violation{jsonPointer(v.InstanceLocation), v.ErrorKind.LocalizedString(printer)})
			return
		}
		for _, c := range v.Causes {
			leaves(c)
		}
	}
	leaves(ve)
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].ptr != vs[j].ptr {
			return vs[i].ptr < vs[j].ptr
		}
		return vs[i].msg < vs[j].msg
	})
	var errs []*Error
	for i, v := range vs {
		if i > 0 && v == vs[i-1] {
			continue
		}
		where := "config " + v.ptr
		if v.ptr == "" {
			where = "config (top level)"
		}
		errs = append(errs, fail("%s: %s", where, v.msg))
	}
	return joinErrors(errs)
}

// jsonPointer writes tokens as an RFC 6901 pointer.
func jsonPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
