// Package schemacheck compiles JSON Schema documents and reports every
// violation of an instance with its JSON pointer, sorted, in plain English.
// Plugin configs and tool arguments are both checked with it.
package schemacheck

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
	var leaves func(v *jsonschema.ValidationError)
	leaves = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			vs = append(vs, Violation{pointer(v.InstanceLocation), v.ErrorKind.LocalizedString(printer)})
			return
		}
		for _, c := range v.Causes {
			leaves(c)
		}
	}
	leaves(ve)
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].Pointer != vs[j].Pointer {
			return vs[i].Pointer < vs[j].Pointer
		}
		return vs[i].Message < vs[j].Message
	})
	out := vs[:0]
	for i, v := range vs {
		if i == 0 || v != vs[i-1] {
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
