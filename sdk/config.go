package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// A plugin's config is one Go struct: SchemaOf derives the JSON Schema the
// host validates against (Description.ConfigSchema), DecodeConfig decodes
// the validated object into the struct. Struct tags say what the type
// cannot:
//
//	json:"name"          the property name (as encoding/json reads it)
//	desc:"…"             the property's description
//	minimum:"N"          the least value of an integer or number
//	default:"V"          the value an absent property takes (in the schema too)
//	pattern:"RE"         a string's pattern
//	keys:"RE"            the pattern of a map's keys
//
// Supported types: structs (objects that refuse unknown properties),
// strings, booleans, integers, floats, maps with string keys, slices, and
// pointers to any of these.

// SchemaOf returns the JSON Schema (draft 2020-12) of config type T, which
// must be a struct. It panics on a type it cannot describe: that is a
// mistake in the plugin, found the first time it is described.
func SchemaOf[T any]() string {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("sdk.SchemaOf: config type %v is not a struct", t))
	}
	s, err := schemaOf(t, "")
	if err != nil {
		panic("sdk.SchemaOf: " + err.Error())
	}
	s.Schema = "https://json-schema.org/draft/2020-12/schema"
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic("sdk.SchemaOf: " + err.Error())
	}
	return string(out)
}

// DecodeConfig decodes a config object into a T: properties T does not
// have are refused, absent ones take their default tag. The host has
// already checked raw against SchemaOf[T]; the decoder is strict all the
// same, so a plugin applied without that check cannot misread its config.
func DecodeConfig[T any](raw json.RawMessage) (T, error) {
	var cfg T
	v := reflect.ValueOf(&cfg).Elem()
	if err := setDefaults(v, ""); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return cfg, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return cfg, fmt.Errorf("config: unexpected data after the config object")
	}
	return cfg, nil
}

// schema is the subset of JSON Schema SchemaOf writes, in a fixed order.
type schema struct {
	Schema               string          `json:"$schema,omitempty"`
	Type                 string          `json:"type,omitempty"`
	Description          string          `json:"description,omitempty"`
	Minimum              json.RawMessage `json:"minimum,omitempty"`
	Default              json.RawMessage `json:"default,omitempty"`
	Pattern              string          `json:"pattern,omitempty"`
	Items                *schema         `json:"items,omitempty"`
	PropertyNames        *schema         `json:"propertyNames,omitempty"`
	AdditionalProperties any             `json:"additionalProperties,omitempty"`
	Properties           *properties     `json:"properties,omitempty"`
}

// properties keeps the struct's field order in the schema.
type properties []property

type property struct {
	name string
	s    *schema
}

func (p properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, prop := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(prop.name)
		b.Write(name)
		b.WriteByte(':')
		v, err := json.Marshal(prop.s)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func schemaOf(t reflect.Type, path string) (*schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return &schema{Type: "string"}, nil
	case reflect.Bool:
		return &schema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &schema{Type: "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return &schema{Type: "number"}, nil
	case reflect.Slice, reflect.Array:
		items, err := schemaOf(t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return &schema{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map key type %v is not a string", label(path), t.Key())
		}
		values, err := schemaOf(t.Elem(), path+"{}")
		if err != nil {
			return nil, err
		}
		return &schema{Type: "object", AdditionalProperties: values}, nil
	case reflect.Struct:
		s := &schema{Type: "object", AdditionalProperties: false, Properties: &properties{}}
		for _, f := range reflect.VisibleFields(t) {
			name, ok := jsonName(f)
			if !ok {
				continue
			}
			ps, err := fieldSchema(f, join(path, name))
			if err != nil {
				return nil, err
			}
			*s.Properties = append(*s.Properties, property{name, ps})
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s: type %v has no JSON Schema here", label(path), t)
}

func fieldSchema(f reflect.StructField, path string) (*schema, error) {
	s, err := schemaOf(f.Type, path)
	if err != nil {
		return nil, err
	}
	s.Description = f.Tag.Get("desc")
	if m, ok := f.Tag.Lookup("minimum"); ok {
		if s.Type != "integer" && s.Type != "number" {
			return nil, fmt.Errorf("%s: minimum on a %s", path, s.Type)
		}
		if _, err := strconv.ParseFloat(m, 64); err != nil {
			return nil, fmt.Errorf("%s: minimum %q is not a number", path, m)
		}
		s.Minimum = json.RawMessage(m)
	}
	if p, ok := f.Tag.Lookup("pattern"); ok {
		if s.Type != "string" {
			return nil, fmt.Errorf("%s: pattern on a %s", path, s.Type)
		}
		s.Pattern = p
	}
	if k, ok := f.Tag.Lookup("keys"); ok {
		if f.Type.Kind() != reflect.Map {
			return nil, fmt.Errorf("%s: keys on a %s", path, s.Type)
		}
		s.PropertyNames = &schema{Pattern: k}
	}
	if d, ok := f.Tag.Lookup("default"); ok {
		v := reflect.New(f.Type).Elem()
		if err := parseDefault(v, d); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		s.Default, _ = json.Marshal(v.Interface())
	}
	return s, nil
}

// setDefaults gives every field with a default tag its value, nested
// structs included, before the config object is decoded over them.
func setDefaults(v reflect.Value, path string) error {
	for _, f := range reflect.VisibleFields(v.Type()) {
		name, ok := jsonName(f)
		if !ok {
			continue
		}
		fv := v.FieldByIndex(f.Index)
		if d, ok := f.Tag.Lookup("default"); ok {
			if err := parseDefault(fv, d); err != nil {
				return fmt.Errorf("%s: %w", join(path, name), err)
			}
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			if err := setDefaults(fv, join(path, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseDefault reads a default tag into v: scalars as written, anything
// else as JSON.
func parseDefault(v reflect.Value, d string) error {
	switch v.Kind() {
	case reflect.String:
		v.SetString(d)
		return nil
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return parseDefault(v.Elem(), d)
	}
	if err := json.Unmarshal([]byte(d), v.Addr().Interface()); err != nil {
		return fmt.Errorf("default %q: %w", d, err)
	}
	return nil
}

// jsonName is the property name encoding/json uses for f, and whether f is
// a property at all.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() || f.Anonymous {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name, true
	}
	return f.Name, true
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func label(path string) string {
	if path == "" {
		return "config"
	}
	return path
}
