package composition

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// env returns a lookup over vars.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

var noEnv = env(nil)

// errorsOf returns the *Error values of err, one or joined.
func errorsOf(t *testing.T, err error) []*Error {
	t.Helper()
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*Error
		for _, e := range j.Unwrap() {
			out = append(out, errorsOf(t, e)...)
		}
		return out
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not an *Error: %v", err, err)
	}
	return []*Error{e}
}

func mustParse(t *testing.T, src string, vars map[string]string) *Composition {
	t.Helper()
	c, err := Parse("compositions/x.yaml", []byte(src), env(vars))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestLoadFull(t *testing.T) {
	c, err := Load("testdata/full.yaml", env(map[string]string{"MODEL": "m-1"}))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("testdata/full.yaml")
	if c.File != abs || c.Dir != filepath.Dir(abs) {
		t.Errorf("File, Dir = %q, %q; want %q and its directory", c.File, c.Dir, abs)
	}
	if want := (HostSettings{StartTimeout: 2 * time.Second, StopTimeout: 90 * time.Second,
		Scrub: Scrub{Extra: []string{"auth", "DSN"}, Keep: []string{"GPG_KEY_ID"}}}); !reflect.DeepEqual(c.Host, want) {
		t.Errorf("Host = %+v", c.Host)
	}
	wantSettings := map[string]map[string]any{
		"shell": {"timeoutMs": 120000, "shell": "/bin/sh"},
		"empty": {},
	}
	if !reflect.DeepEqual(c.Settings, wantSettings) {
		t.Errorf("Settings = %#v\nwant %#v", c.Settings, wantSettings)
	}
	want := []Entry{
		{ID: "env", Name: "shell-env", Config: map[string]any{"facts": map[string]any{
			"DSH_COMPOSITION": "full", "DSH_HOME": "/srv/dsh"}}},
		{ID: "llm", Name: "llm", Disabled: true, Config: map[string]any{"model": "m-1", "apiKey": "sk-123"}},
		{ID: "probe", Path: "./bin/dsh-probe", SHA256: strings.ToLower("ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789")},
		{ID: "other", Path: "/opt/dsh/tool"},
	}
	if len(c.Plugins) != len(want) {
		t.Fatalf("%d plugins, want %d: %+v", len(c.Plugins), len(want), c.Plugins)
	}
	lines := []struct{ pos, config int }{{14, 16}, {20, 22}, {23, 23}, {25, 25}}
	for i, w := range want {
		g := c.Plugins[i]
		if g.ID != w.ID || g.Name != w.Name || g.Path != w.Path || g.SHA256 != w.SHA256 || g.Disabled != w.Disabled || !reflect.DeepEqual(g.Config, w.Config) {
			t.Errorf("plugin %d = %+v\nwant %+v", i, g, w)
		}
		if g.Pos.File != abs || g.Pos.Line != lines[i].pos || g.Pos.Column != 5 {
			t.Errorf("plugin %d Pos = %+v, want %s:%d:5", i, g.Pos, abs, lines[i].pos)
		}
		if g.ConfigPos.Line != lines[i].config {
			t.Errorf("plugin %d ConfigPos = %+v, want line %d", i, g.ConfigPos, lines[i].config)
		}
	}
	if got := c.Plugins[0].Pos.String(); got != filepath.Join("testdata", "full.yaml")+":14:5" {
		t.Errorf("Pos.String() = %q, want it relative to the working directory", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), noEnv)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want one wrapping fs.ErrNotExist", err)
	}
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v, want an *Error naming the file", err)
	}
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, "plugins: []\n", nil)
	if c.Host.StartTimeout != 10*time.Second || c.Host.StopTimeout != 5*time.Second {
		t.Errorf("Host = %+v, want 10s and 5s", c.Host)
	}
	if c.Settings == nil || len(c.Settings) != 0 || c.Plugins == nil || len(c.Plugins) != 0 {
		t.Errorf("Settings, Plugins = %#v, %#v; want empty, not nil", c.Settings, c.Plugins)
	}
	// Null sections mean "nothing".
	c = mustParse(t, "host:\nsettings:\nplugins:\n", nil)
	if c.Host.StartTimeout != 10*time.Second || len(c.Plugins) != 0 {
		t.Errorf("null sections: %+v", c)
	}
	// Document markers, and an empty document after the composition.
	for _, src := range []string{"---\nplugins: []\n...\n", "plugins: []\n---\n", "plugins: []\n---\n# end\n"} {
		if _, err := Parse("x.yaml", []byte(src), noEnv); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
	c = mustParse(t, "plugins:\n  - path: ./p\n    sha256: ${PIN:-}\n", nil)
	if c.Plugins[0].SHA256 != "" {
		t.Errorf("empty pin: SHA256 = %q", c.Plugins[0].SHA256)
	}
	c = mustParse(t, "plugins:\n  - name: a\n    config:\n", nil)
	if c.Plugins[0].Config != nil || c.Plugins[0].ConfigPos.Line != 3 {
		t.Errorf("null config: %+v", c.Plugins[0])
	}
}

func TestNameForms(t *testing.T) {
	for _, name := range []string{"shell-env", "dsh-shell-env", "@deepseek-ai/dsh-shell-env", "@anything/dsh-shell-env"} {
		c := mustParse(t, "plugins:\n  - name: \""+name+"\"\n", nil)
		e := c.Plugins[0]
		if e.Name != "shell-env" || e.ID != "shell-env" || e.BinaryName() != "dsh-shell-env" {
			t.Errorf("%s: Name %q, ID %q, BinaryName %q", name, e.Name, e.ID, e.BinaryName())
		}
	}
	for _, name := range []string{"Shell", "shell_env", "-x", "dsh-", "@scope/shell-env", "@/dsh-x", "@Scope/dsh-x", "a/b", ""} {
		_, err := Parse("x.yaml", []byte("plugins:\n  - name: \""+name+"\"\n"), noEnv)
		if err == nil || !strings.Contains(err.Error(), "x.yaml:2:") || !strings.Contains(err.Error(), "bad name") {
			t.Errorf("name %q: err = %v, want a bad name at line 2", name, err)
		}
	}
}

func TestDefaultIDs(t *testing.T) {
	c := mustParse(t, `
plugins:
  - name: dsh-shell-env
  - name: "@x/dsh-llm"
  - path: ./bin/dsh-probe
  - path: tools/other.exe
  - path: /abs/dsh-dsh-z
  - id: given
    name: shell-env
`, nil)
	var ids []string
	for _, e := range c.Plugins {
		ids = append(ids, e.ID)
	}
	if want := []string{"shell-env", "llm", "probe", "other", "dsh-z", "given"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids = %q, want %q", ids, want)
	}
	if got := c.Plugins[2].BinaryName(); got != "dsh-probe" {
		t.Errorf("BinaryName of a path entry = %q", got)
	}

	_, err := Parse("x.yaml", []byte("plugins:\n  - path: ./Tool\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), `x.yaml:2:5: cannot use "Tool" as the default id`) {
		t.Errorf("underivable id: %v", err)
	}
}

// Every kind of static problem, with the line it must be reported at.
func TestErrors(t *testing.T) {
	cases := []struct {
		name, src string
		vars      map[string]string
		line      int
		want      string // exact message after "compositions/x.yaml:<line>: "
	}{
		{"malformed yaml", "plugins:\n  - id: [x\n", nil, 2,
			`malformed YAML: did not find expected ',' or ']'`},
		{"malformed yaml, scanner", "plugins:\n\t- id: x\n", nil, 2,
			`malformed YAML: found character that cannot start any token`},
		{"malformed yaml, first line", "plugins: a: b\n", nil, 1,
			`malformed YAML: mapping values are not allowed in this context`},
		{"unknown anchor", "plugins:\n  - name: a\n    config: *no-pe\n", nil, 3,
			`malformed YAML: unknown anchor 'no-pe' referenced`},
		{"two documents", "plugins: []\n---\nplugins: []\n", nil, 2,
			`a composition is a single YAML document; found another one here`},
		{"root not a map", "- a\n- b\n", nil, 1,
			`a composition is a map with keys host, settings, sandbox, approval, clients, plugins; this is a list`},
		{"root a string", "\n\nhello\n", nil, 3,
			`a composition is a map with keys host, settings, sandbox, approval, clients, plugins; this is a plain value`},
		{"empty file", "# nothing\n", nil, 1,
			`missing required key "plugins" (a list of plugin entries, possibly empty: "plugins: []")`},
		{"missing plugins", "\nhost: {}\n", nil, 2,
			`missing required key "plugins" (a list of plugin entries, possibly empty: "plugins: []")`},
		{"unknown top-level key", "plugins: []\nplugin: []\n", nil, 2,
			`unknown key "plugin" (allowed: host, settings, sandbox, approval, clients, plugins)`},
		{"unknown entry key", "plugins:\n  - id: probe\n    name: probe\n    confg: {}\n", nil, 4,
			`plugin "probe": unknown key "confg" (allowed: id, name, path, sha256, config, disabled)`},
		{"unknown host key", "host:\n  startTimeOut: 1s\nplugins: []\n", nil, 2,
			`unknown host key "startTimeOut" (allowed: startTimeout, stopTimeout, callTimeout, pingInterval, pingTimeout, restartWait, scrub, spill)`},
		{"unknown scrub key", "host:\n  scrub:\n    extra: [AUTH]\n    kept: [X]\nplugins: []\n", nil, 4,
			`unknown host.scrub key "kept" (allowed: extra, keep)`},
		{"scrub not a map", "host:\n  scrub: [AUTH]\nplugins: []\n", nil, 2,
			`host.scrub must be a map with extra and keep, got a list`},
		{"scrub extra not a list", "host:\n  scrub:\n    extra: AUTH\nplugins: []\n", nil, 3,
			`host.scrub.extra must be a list of strings, got the string "AUTH"`},
		{"scrub extra empty string", "host:\n  scrub:\n    extra:\n      - AUTH\n      - ''\nplugins: []\n", nil, 5,
			`host.scrub.extra: want a part of a variable name (letters, digits, _), got the string ""`},
		{"scrub extra not a string", "host:\n  scrub:\n    extra: [AUTH, {a: 1}]\nplugins: []\n", nil, 3,
			`host.scrub.extra: want a part of a variable name (letters, digits, _), got a map`},
		{"scrub keep bad name", "host:\n  scrub:\n    keep:\n      - GH_TOKEN\n      - GH TOKEN\nplugins: []\n", nil, 5,
			`host.scrub.keep: want a variable name, got the string "GH TOKEN"`},
		{"scrub keep DSH_", "host:\n  scrub:\n    keep: [DSH_SECRET]\nplugins: []\n", nil, 3,
			`host.scrub.keep: DSH_SECRET is in the DSH_ namespace, which commands get only from ctx.shellEnv, never from the host's environment`},
		{"host not a map", "host: [1]\nplugins: []\n", nil, 1,
			`host must be a map, got a list`},
		{"bad duration", "host:\n  startTimeout: 10\nplugins: []\n", nil, 2,
			`bad duration for startTimeout: got the number 10, want a positive Go duration such as "10s" or "1m30s"`},
		{"bad duration string", "host:\n  stopTimeout: soon\nplugins: []\n", nil, 2,
			`bad duration for stopTimeout: got the string "soon", want a positive Go duration such as "10s" or "1m30s"`},
		{"negative duration", "host:\n  stopTimeout: -1s\nplugins: []\n", nil, 2,
			`bad duration for stopTimeout: got the string "-1s", want a positive Go duration such as "10s" or "1m30s"`},
		{"plugins not a list", "plugins:\n  env: {name: shell-env}\n", nil, 2,
			`plugins must be a list of entries, got a map`},
		{"entry not a map", "plugins:\n  - shell-env\n", nil, 2,
			`plugins entry 1 must be a map with name or path, got the string "shell-env"`},
		{"both name and path", "plugins:\n  - id: x\n    name: a\n    path: ./a\n", nil, 2,
			`plugin "x": both name and path are set; an entry has exactly one`},
		{"neither name nor path", "plugins:\n  - id: x\n    disabled: true\n", nil, 2,
			`plugin "x": neither name nor path is set; an entry has exactly one`},
		{"bad name", "plugins:\n  - name: Shell_Env\n", nil, 2,
			`bad name "Shell_Env": want <name>, dsh-<name> or @scope/dsh-<name>, <name> matching ^[a-z0-9][a-z0-9-]*$`},
		{"name not a string", "plugins:\n  - id: x\n    name: [a]\n", nil, 3,
			`plugin "x": name must be a string, got a list`},
		{"empty path", "plugins:\n  - id: x\n    path: ''\n", nil, 3,
			`plugin "x": path must not be empty`},
		{"duplicate id", "plugins:\n  - id: env\n    name: shell-env\n  - name: other\n  - id: env\n    name: other-env\n", nil, 5,
			`plugin "env": duplicate id "env" (first at line 2, again at line 5)`},
		{"duplicate default id", "plugins:\n  - name: shell-env\n  - name: dsh-shell-env\n", nil, 3,
			`plugin "shell-env": duplicate id "shell-env" (first at line 2, again at line 3)`},
		{"bad id", "plugins:\n  - id: 9lives\n    name: cat\n", nil, 2,
			`plugin "cat": bad id "9lives": an id matches ^[a-z][a-z0-9_-]*$`},
		{"id not a string", "plugins:\n  - id: 12\n    name: cat\n", nil, 2,
			`plugin "cat": id must be a string, got the number 12`},
		{"sha256 not hex", "plugins:\n  - path: ./p\n    sha256: abc\n", nil, 3,
			`plugin "p": sha256 must be 64 hex digits, got "abc" (3 characters)`},
		{"sha256 not hex, 64 long", "plugins:\n  - path: ./p\n    sha256: " + strings.Repeat("g", 64) + "\n", nil, 3,
			`plugin "p": sha256 must be 64 hex digits, got "` + strings.Repeat("g", 64) + `" (64 characters)`},
		{"unset variable", "plugins:\n  - name: a\n    config:\n      home: ${DSH_HOMEE}\n", nil, 4,
			`plugin "a": environment variable DSH_HOMEE is not set (write ${DSH_HOMEE:-default} to make it optional)`},
		{"required variable", "plugins:\n  - name: a\n    config:\n      key: ${API_KEY:?set API_KEY to your key}\n", nil, 4,
			`plugin "a": environment variable API_KEY is unset or empty: set API_KEY to your key`},
		{"required variable, empty", "plugins:\n  - name: a\n    config: {k: \"${K:?}\"}\n", map[string]string{"K": ""}, 3,
			`plugin "a": environment variable K is unset or empty: required`},
		{"unterminated reference", "settings:\n  s: {a: \"${A}\"}\n  t: {b: \"${B\"}\nplugins: []\n", map[string]string{"A": "1"}, 3,
			`unterminated reference "${B": missing }`},
		{"bad reference", "settings:\n  s: {a: \"${A-x}\"}\nplugins: []\n", nil, 2,
			`bad reference "${A-x}": want ${VAR}, ${VAR:-default} or ${VAR:?message}, VAR matching ^[A-Za-z_][A-Za-z0-9_]*$`},
		{"disabled not a bool", "plugins:\n  - name: a\n    disabled: \"yes\"\n", nil, 3,
			`plugin "a": disabled must be true or false, got the string "yes"`},
		{"disabled interpolated", "plugins:\n  - name: a\n    disabled: ${OFF:-false}\n", nil, 3,
			`plugin "a": disabled must be true or false, got the string "false"`},
		{"config not a map", "plugins:\n  - name: a\n    config: [1, 2]\n", nil, 3,
			`plugin "a": config must be a map, got a list`},
		{"settings not a map", "settings: shell\nplugins: []\n", nil, 1,
			`settings must be a map of namespaces (name -> map), got the string "shell"`},
		{"settings namespace not a map", "settings:\n  shell: 120000\nplugins: []\n", nil, 2,
			`settings namespace "shell" must be a map, got the number 120000`},
		{"duplicate key", "plugins:\n  - name: a\n    config:\n      x: 1\n      x: 2\n", nil, 5,
			`plugin "a": duplicate key "x" (first at line 4)`},
		{"complex key", "plugins:\n  - name: a\n    config:\n      ? [k]\n      : v\n", nil, 4,
			`plugin "a": a map key must be a plain value, not a list`},
		{"alias cycle", "settings:\n  s: &a [*a]\nplugins: []\n", nil, 2,
			`alias *a refers to a value that contains it`},
		{"bad merge", "settings:\n  s:\n    <<: 3\nplugins: []\n", nil, 3,
			`<< merges a map or a list of maps, not a plain value`},
		{"bad tag", "settings:\n  s: {n: !!int many}\nplugins: []\n", nil, 2,
			"cannot decode !!str `many` as a !!int"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("compositions/x.yaml", []byte(tc.src), env(tc.vars))
			if err == nil {
				t.Fatalf("no error; got %+v", c)
			}
			if c != nil {
				t.Errorf("a composition came with the error")
			}
			errs := errorsOf(t, err)
			if len(errs) != 1 {
				t.Fatalf("%d errors, want 1:\n%v", len(errs), err)
			}
			at := strconv.Itoa(tc.line)
			if col := errs[0].Pos.Column; col > 0 {
				at += ":" + strconv.Itoa(col)
			}
			if want := "compositions/x.yaml:" + at + ": " + tc.want; err.Error() != want {
				t.Errorf("error:\n got %s\nwant %s", err, want)
			}
			if errs[0].Pos.Line != tc.line {
				t.Errorf("Pos.Line = %d, want %d", errs[0].Pos.Line, tc.line)
			}
		})
	}
}

// A file's problems all come back together, in line order.
func TestAllErrorsTogether(t *testing.T) {
	_, err := Load("testdata/bad.yaml", noEnv)
	if err == nil {
		t.Fatal("no error")
	}
	file := filepath.Join("testdata", "bad.yaml")
	want := []string{
		file + `:2:17: bad duration for startTimeout: got the string "soon", want a positive Go duration such as "10s" or "1m30s"`,
		file + `:3:3: unknown host key "stopTimout" (allowed: startTimeout, stopTimeout, callTimeout, pingInterval, pingTimeout, restartWait, scrub, spill)`,
		file + `:5:10: settings namespace "shell" must be a map, got the number 3`,
		file + `:6:1: unknown key "plugin" (allowed: host, settings, sandbox, approval, clients, plugins)`,
		file + `:10:5: plugin "env": unknown key "confg" (allowed: id, name, path, sha256, config, disabled)`,
		file + `:11:9: bad id "Env": an id matches ^[a-z][a-z0-9_-]*$`,
		file + `:12:11: bad name "Shell_Env": want <name>, dsh-<name> or @scope/dsh-<name>, <name> matching ^[a-z0-9][a-z0-9-]*$`,
		file + `:13:5: plugin "x": both name and path are set; an entry has exactly one`,
		file + `:15:5: neither name nor path is set; an entry has exactly one`,
		file + `:15:13: config must be a map, got a list`,
		file + `:16:9: plugin "env": duplicate id "env" (first at line 8, again at line 16)`,
		file + `:18:13: plugin "env": sha256 must be 64 hex digits, got "abc" (3 characters)`,
		file + `:19:15: plugin "env": disabled must be true or false, got the string "yes"`,
		file + `:20:5: plugins entry 6 must be a map with name or path, got the string "just a string"`,
		file + `:24:14: plugin "secret": environment variable VAULT_TOKEN is not set (write ${VAULT_TOKEN:-default} to make it optional)`,
	}
	got := strings.Split(err.Error(), "\n")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range errorsOf(t, err) {
		if e.Pos.File == "" || e.Pos.Line == 0 {
			t.Errorf("error without a place: %+v", e)
		}
	}
}

func TestPositions(t *testing.T) {
	c := mustParse(t, `plugins:
- id: a
  name: a
  config: {x: 1}

-   name: b
    disabled: true
    config:
      y: 2
- {name: c, config: {}}
`, nil)
	want := []struct{ line, col, cline, ccol int }{{2, 3, 4, 3}, {6, 5, 8, 5}, {10, 3, 10, 13}}
	for i, w := range want {
		e := c.Plugins[i]
		if e.Pos.Line != w.line || e.Pos.Column != w.col || e.ConfigPos.Line != w.cline || e.ConfigPos.Column != w.ccol {
			t.Errorf("entry %d: Pos %d:%d ConfigPos %d:%d, want %d:%d and %d:%d", i,
				e.Pos.Line, e.Pos.Column, e.ConfigPos.Line, e.ConfigPos.Column, w.line, w.col, w.cline, w.ccol)
		}
		if e.Pos.File != "compositions/x.yaml" {
			t.Errorf("entry %d: Pos.File = %q", i, e.Pos.File)
		}
	}
	if !c.Plugins[1].Disabled {
		t.Errorf("entry b not disabled")
	}
}

func TestPosString(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		pos  Pos
		want string
	}{
		{Pos{File: filepath.Join(wd, "compositions", "default.yaml"), Line: 12}, filepath.Join("compositions", "default.yaml") + ":12"},
		{Pos{File: "compositions/default.yaml", Line: 3, Column: 7}, "compositions/default.yaml:3:7"},
		{Pos{File: "/elsewhere/x.yaml", Line: 1}, "/elsewhere/x.yaml:1"},
		{Pos{File: "x.yaml"}, "x.yaml"},
		{Pos{Line: 4}, "<composition>:4"},
	}
	if filepath.Dir(wd) == "/elsewhere" {
		cases = cases[:2]
	}
	for _, tc := range cases {
		if got := tc.pos.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.pos, got, tc.want)
		}
	}
}

func TestAnchorsAndMerges(t *testing.T) {
	c := mustParse(t, `
settings:
  base: &base {level: info, format: text}
plugins:
  - id: a
    name: a
    config:
      <<: *base
      level: debug
  - id: b
    name: b
    config: *base
`, nil)
	if got, want := c.Plugins[0].Config, map[string]any{"level": "debug", "format": "text"}; !reflect.DeepEqual(got, want) {
		t.Errorf("merged config = %v, want %v", got, want)
	}
	if got, want := c.Plugins[1].Config, map[string]any{"level": "info", "format": "text"}; !reflect.DeepEqual(got, want) {
		t.Errorf("aliased config = %v, want %v", got, want)
	}
}

func TestValueTypes(t *testing.T) {
	c := mustParse(t, `
plugins:
  - name: a
    config:
      int: 3
      float: 1.5
      bool: true
      null: ~
      date: 2001-12-14
      list: [1, [2, {3: x}]]
      nested: {1: one, true: yes, 0x10: hex, ~: tilde}
      dotted.key: kept
`, nil)
	want := map[string]any{
		"int": 3, "float": 1.5, "bool": true, "null": nil, "date": "2001-12-14",
		"list":       []any{1, []any{2, map[string]any{"3": "x"}}},
		"nested":     map[string]any{"1": "one", "true": "yes", "0x10": "hex", "~": "tilde"},
		"dotted.key": "kept",
	}
	if got := c.Plugins[0].Config; !reflect.DeepEqual(got, want) {
		t.Errorf("config = %#v\nwant %#v", got, want)
	}
}

// host.scrub: lists of names, interpolated like any value, printed by
// Masked as they are (names, not secrets); absent means nil lists.
func TestScrubSection(t *testing.T) {
	c := mustParse(t, "host:\n  scrub:\n    extra: [auth, '${PART}']\n    keep: [GPG_KEY_ID]\nplugins: []\n", map[string]string{"PART": "dsn"})
	if want := (Scrub{Extra: []string{"auth", "dsn"}, Keep: []string{"GPG_KEY_ID"}}); !reflect.DeepEqual(c.Host.Scrub, want) {
		t.Fatalf("Scrub = %+v, want %+v", c.Host.Scrub, want)
	}
	host := c.Masked()["host"].(map[string]any)
	if !reflect.DeepEqual(host["scrub"], map[string]any{"extra": []string{"auth", "dsn"}, "keep": []string{"GPG_KEY_ID"}}) {
		t.Fatalf("Masked host = %v", host)
	}
	c = mustParse(t, "plugins: []\n", nil)
	if c.Host.Scrub.Extra != nil || c.Host.Scrub.Keep != nil || c.Masked()["host"].(map[string]any)["scrub"] != nil {
		t.Fatalf("no scrub section: %+v", c.Host.Scrub)
	}
}
