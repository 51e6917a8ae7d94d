// Package schemacheck compiles JSON Schema documents and reports every
// violation of an instance with its JSON pointer, sorted, in plain English.
// Plugin configs and tool arguments are both checked with it.
package schemacheck

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema.
type Schema struct{ s *jsonschema.Schema }

// Violation is one way an instance fails a schema.
type Violation struct {
	// Pointer is the RFC 6901 pointer of the offending value ("" for the top).
	Pointer string
	Message string
	// Unknown names the properties of the object at Pointer that its
	// schema does not allow (the message lists them too), so that each can
	// be pointed at.
	Unknown []string
	// Property is set when the name of a property of the object at
	// Pointer is at fault (propertyNames), not a value.
	Property string
}

// Where is "config /a/b" style wording: prefix plus the pointer, or
// "(top level)".
func (v Violation) Where(prefix string) string {
	if v.Pointer == "" {
		return prefix + " (top level)"
	}
	return prefix + " " + v.Pointer
}

// Compile reads a schema document. An empty document gives nil, which
// accepts anything.
func Compile(doc []byte) (*Schema, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, nil
	}
	const url = "urn:dsh:schema"
	d, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, d); err != nil {
		return nil, fmt.Errorf("schema is invalid: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema is invalid: %w", err)
	}
	return &Schema{s: s}, nil
}

// Validate checks a JSON instance; nil means it conforms. A nil Schema
// accepts anything.
func (s *Schema) Validate(instance []byte) ([]Violation, error) {
	if s == nil {
		return nil, nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	err = s.s.Validate(inst)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	var vs []Violation
	printer := message.NewPrinter(language.English)
	// name is the property whose name the causes below judge: they were
	// checked on the name alone, so their own locations are empty.
	var leaves func(v *jsonschema.ValidationError, name *Violation)
	leaves = func(v *jsonschema.ValidationError, name *Violation) {
		if pn, ok := v.ErrorKind.(*kind.PropertyNames); ok {
			name = &Violation{Pointer: pointer(v.InstanceLocation), Property: pn.Property}
		}
		if len(v.Causes) == 0 {
			vi := Violation{Pointer: pointer(v.InstanceLocation), Message: v.ErrorKind.LocalizedString(printer)}
			if name != nil {
				vi.Pointer, vi.Property = name.Pointer, name.Property
			}
			if ap, ok := v.ErrorKind.(*kind.AdditionalProperties); ok {
				vi.Unknown = slices.Sorted(slices.Values(ap.Properties))
			}
			vs = append(vs, vi)
			return
		}
		for _, c := range v.Causes {
			leaves(c, name)
		}
	}
	leaves(ve, nil)
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].Pointer != vs[j].Pointer {
			return vs[i].Pointer < vs[j].Pointer
		}
		if vs[i].Property != vs[j].Property {
			return vs[i].Property < vs[j].Property
		}
		return vs[i].Message < vs[j].Message
	})
	out := vs[:0]
	for i, v := range vs {
		if i == 0 || v.Pointer != vs[i-1].Pointer || v.Message != vs[i-1].Message || v.Property != vs[i-1].Property {
			out = append(out, v)
		}
	}
	return out, nil
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
