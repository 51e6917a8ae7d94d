package composition

import (
	"os"
	"strings"
	"testing"
)

func TestValidateConfig(t *testing.T) {
	schema, err := os.ReadFile("testdata/shell.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, `plugins:
  - id: sh
    name: shell
    config:
      timeoutMs: 1000
      facts: {DSH_A: a}
  - id: bad
    name: shell
    config:
      timeoutMs: soon
      facts: {DSH_A: 1, lower: x}
      limits: {cpu: 1.5, mem: 2}
      extra: true
`, nil)
	good, bad := c.Plugins[0], c.Plugins[1]

	if err := ValidateConfig(good, good.Config, schema); err != nil {
		t.Errorf("good config: %v", err)
	}
	if err := ValidateConfig(bad, bad.Config, nil); err != nil {
		t.Errorf("no schema: %v", err)
	}
	if err := ValidateConfig(bad, bad.Config, []byte(" \n")); err != nil {
		t.Errorf("blank schema: %v", err)
	}

	err = ValidateConfig(bad, bad.Config, schema)
	want := []string{
		`compositions/x.yaml:9: plugin "bad": config (top level): additional properties 'extra' not allowed`,
		`compositions/x.yaml:9: plugin "bad": config /facts/DSH_A: got number, want string`,
		`compositions/x.yaml:9: plugin "bad": config /limits: additional properties 'mem' not allowed`,
		`compositions/x.yaml:9: plugin "bad": config /timeoutMs: got string, want integer`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("err =\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
	for _, e := range errorsOf(t, err) {
		if e.Pos != bad.ConfigPos || e.ID != "bad" {
			t.Errorf("error at %+v for %q, want %+v for \"bad\"", e.Pos, e.ID, bad.ConfigPos)
		}
	}

	// A missing config is an empty map; without config: the entry's line.
	noCfg := Entry{ID: "n", Pos: Pos{File: "f.yaml", Line: 7}}
	err = ValidateConfig(noCfg, nil, []byte(`{"type": "object", "required": ["timeoutMs"]}`))
	if err == nil || err.Error() != `f.yaml:7: plugin "n": config (top level): missing property 'timeoutMs'` {
		t.Errorf("missing property: %v", err)
	}

	// A bad schema is reported, not panicked on.
	for _, s := range []string{`{"type": `, `{"type": "nosuchtype"}`} {
		err = ValidateConfig(good, good.Config, []byte(s))
		if err == nil || !strings.Contains(err.Error(), "the plugin's config schema is") {
			t.Errorf("schema %s: err = %v", s, err)
		}
	}
}
