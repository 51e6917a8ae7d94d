package composition

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"X": "x", "EMPTY": "", "Y": "why"}
	cases := []struct {
		in, out string
		refs    []string
	}{
		{"plain", "plain", nil},
		{"", "", nil},
		{"$$", "$", nil},
		{"a$$b", "a$b", nil},
		{"$${X}", "${X}", nil},
		{"$$$${X}", "$${X}", nil},
		{"$$${X}", "$x", []string{"X"}},
		{"cost $5", "cost $5", nil},
		{"$X stays", "$X stays", nil},
		{"trailing $", "trailing $", nil},
		{"${X}", "x", []string{"X"}},
		{"${EMPTY}", "", []string{"EMPTY"}},
		{"a${X}b${Y}c${X}", "axbwhycx", []string{"X", "Y"}},
		{"${UNSET:-dflt}", "dflt", []string{"UNSET"}},
		{"${EMPTY:-dflt}", "dflt", []string{"EMPTY"}},
		{"${X:-dflt}", "x", []string{"X"}},
		{"${UNSET:-}", "", []string{"UNSET"}},
		{"${UNSET:-a: b, #c $d}", "a: b, #c $d", []string{"UNSET"}},
		{"${X:?needed}", "x", []string{"X"}},
		{"${_under_score9}", "", []string{"_under_score9"}},
	}
	lookup := env(vars)
	lookup2 := func(k string) (string, bool) {
		if k == "_under_score9" {
			return "", true
		}
		return lookup(k)
	}
	for _, tc := range cases {
		out, refs, problems := expand(tc.in, lookup2)
		if out != tc.out || !reflect.DeepEqual(refs, tc.refs) || len(problems) != 0 {
			t.Errorf("expand(%q) = %q, %q, %q; want %q, %q, no problem", tc.in, out, refs, problems, tc.out, tc.refs)
		}
	}

	bad := []struct{ in, problem string }{
		{"${UNSET}", "environment variable UNSET is not set (write ${UNSET:-default} to make it optional)"},
		{"${UNSET:?give it}", "environment variable UNSET is unset or empty: give it"},
		{"${EMPTY:?}", "environment variable EMPTY is unset or empty: required"},
		{"${X", `unterminated reference "${X": missing }`},
		{"${}", `bad reference "${}": want ${VAR}, ${VAR:-default} or ${VAR:?message}, VAR matching ^[A-Za-z_][A-Za-z0-9_]*$`},
		{"${1X}", `bad reference "${1X}": want ${VAR}, ${VAR:-default} or ${VAR:?message}, VAR matching ^[A-Za-z_][A-Za-z0-9_]*$`},
		{"${X:+alt}", `bad reference "${X:+alt}": want ${VAR}, ${VAR:-default} or ${VAR:?message}`},
		{"${X:}", `bad reference "${X:}": want ${VAR}, ${VAR:-default} or ${VAR:?message}`},
	}
	for _, tc := range bad {
		_, _, problems := expand(tc.in, lookup)
		if len(problems) != 1 || problems[0] != tc.problem {
			t.Errorf("expand(%q) problems = %q, want [%q]", tc.in, problems, tc.problem)
		}
	}
	// Every problem of a value is reported.
	if _, _, problems := expand("${A}-${B}", lookup); len(problems) != 2 {
		t.Errorf("two unset variables: problems %q", problems)
	}
}

func TestInterpolationInFile(t *testing.T) {
	vars := map[string]string{
		"ENV_NAME": "shell-env",
		"START":    "3s",
		"DIR":      "/opt/tools",
	}
	c := mustParse(t, `
host:
  startTimeout: ${START}
  stopTimeout: ${STOP:-2s}
settings:
  shell:
    ${KEY_NOT_INTERPOLATED}: literal key
    price: $$5 or $5
plugins:
  - id: env
    name: ${ENV_NAME}
  - path: ${DIR}/dsh-tool
`, vars)
	if c.Host.StartTimeout != 3*time.Second || c.Host.StopTimeout != 2*time.Second {
		t.Errorf("Host = %+v", c.Host)
	}
	if got, want := c.Settings["shell"], map[string]any{"${KEY_NOT_INTERPOLATED}": "literal key", "price": "$5 or $5"}; !reflect.DeepEqual(got, want) {
		t.Errorf("settings = %#v, want %#v", got, want)
	}
	if c.Plugins[0].Name != "shell-env" || c.Plugins[1].Path != "/opt/tools/dsh-tool" || c.Plugins[1].ID != "tool" {
		t.Errorf("plugins = %+v", c.Plugins)
	}
}

// A value that reads like YAML stays the string it is, whatever its quoting,
// and the lines after it do not move.
func TestInterpolationCannotInjectYAML(t *testing.T) {
	values := []string{
		"true", "123", "1.5", "null", "~", "", "a: b", "[1, 2]", "{x: 1}", "- item",
		"#comment", "*alias", "&anchor x", "!!int 3", "'single\"double", "multi\nline\n",
		"---", "...", "  spaced  ", "2001-12-14", "0x10", "<<", "%YAML 1.2", "tab\there", "\\n",
	}
	for _, v := range values {
		c := mustParse(t, `
plugins:
  - name: a
    config:
      plain: ${V}
      quoted: "${V}"
      single: '${V}'
      literal: |-
        ${V}
      mixed: pre-${V}-post
      flow: ["${V}", '${V}']
      block:
        - ${V}
  - name: b
`, map[string]string{"V": v})
		cfg := c.Plugins[0].Config
		want := map[string]any{
			"plain": v, "quoted": v, "single": v, "literal": v,
			"mixed": "pre-" + v + "-post", "flow": []any{v, v}, "block": []any{v},
		}
		if !reflect.DeepEqual(cfg, want) {
			t.Errorf("V=%q: config = %#v\nwant %#v", v, cfg, want)
		}
		if c.Plugins[1].Pos.Line != 14 {
			t.Errorf("V=%q: the next entry moved to line %d", v, c.Plugins[1].Pos.Line)
		}
	}
}

func TestNilLookupIsTheEnvironment(t *testing.T) {
	t.Setenv("DSH_COMPOSITION_TEST_VAR", "from-env")
	c, err := Parse("x.yaml", []byte("settings:\n  s: {v: $DSH_COMPOSITION_TEST_VAR, w: \"${DSH_COMPOSITION_TEST_VAR}\"}\nplugins: []\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Settings["s"]; got["v"] != "$DSH_COMPOSITION_TEST_VAR" || got["w"] != "from-env" {
		t.Errorf("settings = %v", got)
	}
}

// Problems inside an entry name it; one bad value does not hide the next.
func TestInterpolationErrorsAll(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`plugins:
  - id: a
    name: a
    config:
      one: ${ONE}
      two: ${TWO:?two is needed}
  - id: b
    name: ${NAME}
`), noEnv)
	want := []string{
		`x.yaml:5:12: plugin "a": environment variable ONE is not set (write ${ONE:-default} to make it optional)`,
		`x.yaml:6:12: plugin "a": environment variable TWO is unset or empty: two is needed`,
		`x.yaml:8:11: plugin "b": environment variable NAME is not set (write ${NAME:-default} to make it optional)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("err =\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}
