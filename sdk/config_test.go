package sdk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type nested struct {
	Mode string `json:"mode" default:"fast"`
}

type testConfig struct {
	Name    string            `json:"name" desc:"who" pattern:"^[a-z]+$"`
	Count   int64             `json:"count" minimum:"1" default:"3"`
	Ratio   float64           `json:"ratio"`
	On      bool              `json:"on" default:"true"`
	Facts   map[string]string `json:"facts" keys:"^DSH_[A-Z]+$"`
	Tags    []string          `json:"tags"`
	Inner   nested            `json:"inner"`
	Skipped string            `json:"-"`
	hidden  string
}

func TestSchemaOf(t *testing.T) {
	var got any
	if err := json.Unmarshal([]byte(SchemaOf[testConfig]()), &got); err != nil {
		t.Fatal(err)
	}
	var want any
	_ = json.Unmarshal([]byte(`{
	  "$schema": "https://json-schema.org/draft/2020-12/schema",
	  "type": "object", "additionalProperties": false,
	  "properties": {
	    "name":  {"type": "string", "description": "who", "pattern": "^[a-z]+$"},
	    "count": {"type": "integer", "minimum": 1, "default": 3},
	    "ratio": {"type": "number"},
	    "on":    {"type": "boolean", "default": true},
	    "facts": {"type": "object", "propertyNames": {"pattern": "^DSH_[A-Z]+$"}, "additionalProperties": {"type": "string"}},
	    "tags":  {"type": "array", "items": {"type": "string"}},
	    "inner": {"type": "object", "additionalProperties": false,
	              "properties": {"mode": {"type": "string", "default": "fast"}}}
	  }
	}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("schema:\n%s", SchemaOf[testConfig]())
	}
	// The properties keep the struct's order, so descriptions read as written.
	s := SchemaOf[testConfig]()
	if strings.Index(s, `"name"`) > strings.Index(s, `"count"`) || strings.Index(s, `"tags"`) > strings.Index(s, `"inner"`) {
		t.Errorf("properties out of field order:\n%s", s)
	}
}

func TestSchemaOfEmpty(t *testing.T) {
	var got map[string]any
	_ = json.Unmarshal([]byte(SchemaOf[struct{}]()), &got)
	if got["type"] != "object" || got["additionalProperties"] != false || len(got["properties"].(map[string]any)) != 0 {
		t.Errorf("empty config schema: %v", got)
	}
}

func TestSchemaOfRefusesWhatItCannotDescribe(t *testing.T) {
	for name, f := range map[string]func(){
		"not a struct": func() { SchemaOf[string]() },
		"int map keys": func() { SchemaOf[struct{ M map[int]string }]() },
		"channel":      func() { SchemaOf[struct{ C chan int }]() },
		"minimum on text": func() {
			SchemaOf[struct {
				S string `minimum:"1"`
			}]()
		},
		"bad default": func() {
			SchemaOf[struct {
				N int `default:"x"`
			}]()
		},
		"keys on a string": func() {
			SchemaOf[struct {
				S string `keys:"^a$"`
			}]()
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestDecodeConfig(t *testing.T) {
	cfg, err := DecodeConfig[testConfig](json.RawMessage(`{"name":"ab","ratio":0.5,"facts":{"DSH_X":"1"},"tags":["a"],"inner":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := testConfig{Name: "ab", Count: 3, Ratio: 0.5, On: true, Facts: map[string]string{"DSH_X": "1"}, Tags: []string{"a"}, Inner: nested{Mode: "fast"}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("decoded %+v, want %+v", cfg, want)
	}
	// Given values win over defaults, false and nested ones included.
	cfg, err = DecodeConfig[testConfig](json.RawMessage(`{"count":7,"on":false,"inner":{"mode":"slow"}}`))
	if err != nil || cfg.Count != 7 || cfg.On || cfg.Inner.Mode != "slow" {
		t.Errorf("decoded %+v, %v", cfg, err)
	}
	// Nothing given: every default.
	for _, raw := range []string{``, `{}`} {
		cfg, err = DecodeConfig[testConfig](json.RawMessage(raw))
		if err != nil || cfg.Count != 3 || !cfg.On || cfg.Inner.Mode != "fast" {
			t.Errorf("%q: decoded %+v, %v", raw, cfg, err)
		}
	}
}

func TestDecodeConfigRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		`{"nmae":"x"}`:           `unknown field "nmae"`,
		`{"inner":{"mdoe":"x"}}`: `unknown field "mdoe"`,
		`{"Skipped":"x"}`:        `unknown field "Skipped"`,
		`{"count":"3"}`:          "cannot unmarshal string",
		`{"on":1}`:               "cannot unmarshal number",
		`{"facts":{"DSH_X":1}}`:  "cannot unmarshal number",
		`{"count":1.5}`:          "cannot unmarshal number 1.5",
		`{} {}`:                  "unexpected data after the config object",
		`[]`:                     "cannot unmarshal array",
		`{"name":"x"`:            "unexpected EOF",
	} {
		_, err := DecodeConfig[testConfig](json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("%s: error %v, want one containing %q", raw, err, want)
		}
	}
}
