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

	if err := c.ValidateConfig(good, "", good.Config, schema); err != nil {
		t.Errorf("good config: %v", err)
	}
	if err := c.ValidateConfig(bad, "", bad.Config, nil); err != nil {
		t.Errorf("no schema: %v", err)
	}
	if err := c.ValidateConfig(bad, "", bad.Config, []byte(" \n")); err != nil {
		t.Errorf("blank schema: %v", err)
	}

	// Each violation at the value at fault: an unknown key at the key, a
	// map at the key that names it.
	err = c.ValidateConfig(bad, "", bad.Config, schema)
	want := []string{
		`compositions/x.yaml:10:18: plugin "bad": config /timeoutMs: got string, want integer`,
		`compositions/x.yaml:11:22: plugin "bad": config /facts/DSH_A: got number, want string`,
		`compositions/x.yaml:12:26: plugin "bad": config /limits: unknown key "mem" (allowed: cpu)`,
		`compositions/x.yaml:13:7: plugin "bad": config: unknown key "extra" (allowed: facts, limits, timeoutMs)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("err =\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
	if n := len(errorsOf(t, err)); n != len(want) {
		t.Errorf("%d errors, want %d", n, len(want))
	}

	// A missing config is an empty map; without config: the entry's line.
	noCfg := Entry{ID: "n", Pos: Pos{File: "f.yaml", Line: 7}}
	err = c.ValidateConfig(noCfg, "", nil, []byte(`{"type": "object", "required": ["timeoutMs"]}`))
	if err == nil || err.Error() != `f.yaml:7: plugin "n": config: missing property 'timeoutMs'` {
		t.Errorf("missing property: %v", err)
	}

	// A bad schema is reported, not panicked on.
	for _, s := range []string{`{"type": `, `{"type": "nosuchtype"}`} {
		err = c.ValidateConfig(good, "", good.Config, []byte(s))
		if err == nil || !strings.Contains(err.Error(), "the plugin's config schema is") {
			t.Errorf("schema %s: err = %v", s, err)
		}
	}
}

// A value the plugin reads from its settings namespace is reported where
// settings has it; the entry's own config overrides, and is reported
// where it is; a value reached through an alias, where the alias is.
func TestValidateConfigSettings(t *testing.T) {
	schema, err := os.ReadFile("testdata/shell.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, `settings:
  shell:
    timeoutMs: soon
    limits: {cpu: x, mem: 2}
    facts: &f
      DSH_A: 1
    color: blue
plugins:
  - id: sh
    name: shell
  - id: own
    name: shell
    config:
      timeoutMs: later
      facts: *f
`, nil)
	merged := func(e Entry) map[string]any {
		m := map[string]any{}
		for k, v := range c.Settings["shell"] {
			m[k] = v
		}
		for k, v := range e.Config {
			m[k] = v
		}
		return m
	}
	sh, own := c.Plugins[0], c.Plugins[1]
	err = c.ValidateConfig(sh, "shell", merged(sh), schema)
	want := []string{
		`compositions/x.yaml:3:16: plugin "sh": settings.shell /timeoutMs: got string, want integer`,
		`compositions/x.yaml:4:19: plugin "sh": settings.shell /limits/cpu: got string, want number`,
		`compositions/x.yaml:4:22: plugin "sh": settings.shell /limits: unknown key "mem" (allowed: cpu)`,
		`compositions/x.yaml:6:14: plugin "sh": settings.shell /facts/DSH_A: got number, want string`,
		`compositions/x.yaml:7:5: plugin "sh": settings.shell: unknown key "color" (allowed: facts, limits, timeoutMs)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("err =\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
	err = c.ValidateConfig(own, "shell", merged(own), schema)
	want = []string{
		`compositions/x.yaml:4:19: plugin "own": settings.shell /limits/cpu: got string, want number`,
		`compositions/x.yaml:4:22: plugin "own": settings.shell /limits: unknown key "mem" (allowed: cpu)`,
		`compositions/x.yaml:6:14: plugin "own": config /facts/DSH_A: got number, want string`,
		`compositions/x.yaml:7:5: plugin "own": settings.shell: unknown key "color" (allowed: facts, limits, timeoutMs)`,
		`compositions/x.yaml:14:18: plugin "own": config /timeoutMs: got string, want integer`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("err =\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

// A key whose name the schema refuses (propertyNames) is reported at that
// key, not at the map or the config that holds it.
func TestValidateConfigPropertyNames(t *testing.T) {
	c := mustParse(t, `plugins:
  - id: env
    name: shell-env
    config:
      facts:
        DSH_A: a
        lower: b
`, nil)
	schema := []byte(`{"type": "object", "properties": {"facts": {"type": "object", "propertyNames": {"pattern": "^DSH_"}}}}`)
	err := c.ValidateConfig(c.Plugins[0], "", c.Plugins[0].Config, schema)
	want := `compositions/x.yaml:7:9: plugin "env": config /facts: 'lower' does not match pattern '^DSH_'`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}
