package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host/composition"
)

// desc is a description: "provides" and "injects" keys ("key?" is an
// optional inject), tools, config keys naming tools, and a schema.
type desc struct {
	provides, injects, tools, toolsFromConfig []string
	schema                                    string
}

func (d desc) proto() *lifecycle.Description {
	out := &lifecycle.Description{Tools: d.tools, ToolsFromConfig: d.toolsFromConfig, ConfigSchema: d.schema}
	for _, k := range d.provides {
		out.Provides = append(out.Provides, &lifecycle.Provide{Key: k})
	}
	for _, k := range d.injects {
		key, opt := strings.CutSuffix(k, "?")
		out.Inject = append(out.Inject, &lifecycle.Inject{Key: key, Optional: opt})
	}
	return out
}

// entry is one composition entry; line is its position.
type entry struct {
	id       string
	bin      string // the binary it resolves to ("/bin/<id>" when empty)
	disabled bool
	config   map[string]any
	d        desc
}

func (e entry) binary() string {
	if e.bin != "" {
		return e.bin
	}
	return "/bin/" + e.id
}

func comp(entries ...entry) *composition.Composition {
	c := &composition.Composition{File: "c.yaml", Settings: map[string]map[string]any{}}
	for i, e := range entries {
		c.Plugins = append(c.Plugins, composition.Entry{
			ID: e.id, Path: e.binary(), Disabled: e.disabled, Config: e.config,
			Pos: composition.Pos{File: "c.yaml", Line: 10 * (i + 1)},
		})
	}
	return c
}

// described describes every entry of entries (as start does).
func described(entries ...entry) map[string]Described {
	out := map[string]Described{}
	for _, e := range entries {
		out[e.id] = Described{Binary: e.binary(), Desc: e.d.proto()}
	}
	return out
}

// running is the running set planned from entries.
func running(t *testing.T, entries ...entry) []Running {
	t.Helper()
	c := comp(entries...)
	p, errs := Make(Input{Comp: c, Described: described(entries...), Core: isCore})
	if len(errs) > 0 {
		t.Fatalf("running set: %v", errs)
	}
	var out []Running
	for _, st := range p.Steps {
		out = append(out, Running{Entry: st.Entry, Binary: st.Binary, Desc: st.Desc, Config: st.Config, Tools: st.Tools})
	}
	return out
}

func isCore(key string) bool { return key == "subprocess" || key == "jobs" || key == "tools" }

var (
	env   = entry{id: "env", d: desc{provides: []string{"shellEnv"}}}
	bash  = entry{id: "bash", d: desc{provides: []string{"shell"}, injects: []string{"subprocess"}, schema: `{"type":"object","properties":{"maxOutputBytes":{"type":"integer"}},"additionalProperties":false}`}}
	tools = entry{id: "tools", d: desc{injects: []string{"shell", "shellEnv", "jobs", "tools"}, tools: []string{"bash", "job_output"}}}
	// pbash names its tool by config, "bash" unless toolName says otherwise.
	pbash = entry{id: "pbash", d: desc{injects: []string{"tools"}, tools: []string{"pbash_reset"}, toolsFromConfig: []string{"toolName"},
		schema: `{"type":"object","properties":{"toolName":{"type":"string","default":"bash"},"other":{}},"additionalProperties":false}`}}
)

// toolName is pbash's config naming its tool name.
func toolName(name any) func(*entry) {
	return func(e *entry) { e.config = map[string]any{"toolName": name} }
}

func with(e entry, f func(*entry)) entry {
	f(&e)
	return e
}

// Every check of a whole composition, as validate and start make it.
func TestMakeRefuses(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		want    []string // in each error, in line order
	}{
		{"duplicate provider", []entry{env, bash, with(env, func(e *entry) { e.id = "env2" })},
			[]string{`c.yaml:30: plugin "env2": service "shellEnv" is already provided by plugin "env" (c.yaml:10)`}},
		{"core key", []entry{with(env, func(e *entry) { e.d.provides = []string{"jobs"} })},
			[]string{`c.yaml:10: plugin "env": service "jobs" is provided by the host itself`}},
		{"missing inject", []entry{bash, tools},
			[]string{`c.yaml:20: plugin "tools": injects "shellEnv", which no plugin of the composition provides`}},
		{"only a disabled provider", []entry{with(env, func(e *entry) { e.disabled = true }), bash, tools},
			[]string{`c.yaml:30: plugin "tools": injects "shellEnv", which only the disabled plugin "env" (c.yaml:10) would provide`}},
		{"cycle", []entry{
			{id: "a", d: desc{provides: []string{"A"}, injects: []string{"B"}}},
			{id: "b", d: desc{provides: []string{"B"}, injects: []string{"A"}}},
		}, []string{`dependency cycle: "a" (line 10) -> "b" (line 20) -> "a"`}},
		{"optional injects make no cycle", []entry{
			{id: "a", d: desc{provides: []string{"A"}, injects: []string{"B?"}}},
			{id: "b", d: desc{provides: []string{"B"}, injects: []string{"A"}}},
		}, nil},
		{"duplicate tool", []entry{env, bash, tools, with(tools, func(e *entry) { e.id = "tools2" })},
			[]string{`c.yaml:40: plugin "tools2": tool "bash" is already registered by plugin "tools" (c.yaml:30)`,
				`c.yaml:40: plugin "tools2": tool "job_output" is already registered`}},
		{"a tool named by config's schema default", []entry{env, bash, tools, pbash},
			[]string{`c.yaml:40: plugin "pbash": tool "bash" is already registered by plugin "tools" (c.yaml:30)`}},
		{"a tool named by config", []entry{with(pbash, toolName("bash")), env, bash, tools},
			[]string{`c.yaml:40: plugin "tools": tool "bash" is already registered by plugin "pbash" (c.yaml:10)`}},
		{"a tool named by config, another name", []entry{env, bash, tools, with(pbash, toolName("other"))}, nil},
		{"two entries naming the same tool by config", []entry{with(pbash, toolName("sh")), with(pbash, func(e *entry) { e.id = "pbash2"; e.config = map[string]any{"toolName": "sh"} })},
			[]string{`c.yaml:20: plugin "pbash2": tool "pbash_reset" is already registered by plugin "pbash" (c.yaml:10)`,
				`c.yaml:20: plugin "pbash2": tool "sh" is already registered by plugin "pbash" (c.yaml:10)`}},
		{"a tool name that is none", []entry{with(pbash, toolName("no spaces"))},
			[]string{`c.yaml:10: plugin "pbash": config key "toolName" names a tool, but "no spaces" is not a tool name`}},
		{"a tool name from a schema default that is none", []entry{with(pbash, func(e *entry) {
			e.d.schema = `{"type":"object","properties":{"toolName":{"default":7}}}`
		})}, []string{`c.yaml:10: plugin "pbash": default of config key "toolName" names a tool, but 7 is not a tool name`}},
		{"a tool named by no config and no default", []entry{with(pbash, func(e *entry) { e.d.schema = "" })},
			[]string{`c.yaml:10: plugin "pbash": config key "toolName" names a tool the plugin registers (ToolsFromConfig), but neither the config nor the schema's default sets it`}},
		{"a tool named by config that the plugin declares anyway", []entry{with(pbash, toolName("pbash_reset"))},
			[]string{`c.yaml:10: plugin "pbash": config key "toolName" names tool "pbash_reset", which the plugin already registers`}},
		{"config against the schema", []entry{with(bash, func(e *entry) { e.config = map[string]any{"maxOutputBytes": "lots"} })},
			[]string{`maxOutputBytes`}},
		{"every problem at once", []entry{with(bash, func(e *entry) { e.config = map[string]any{"other": 1} }), tools},
			[]string{`c.yaml:10: plugin "bash"`, `c.yaml:20: plugin "tools": injects "shellEnv"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Make(Input{Comp: comp(tc.entries...), Described: described(tc.entries...), Core: isCore})
			checkErrs(t, errs, tc.want)
		})
	}
}

func checkErrs(t *testing.T, errs []error, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d: %q does not contain %q", i, errs[i], w)
		}
		var pe *Error
		var ce *composition.Error
		if !errors.As(errs[i], &pe) && !errors.As(errs[i], &ce) {
			t.Errorf("error %d has no position: %v", i, errs[i])
		}
	}
}

// An edit of a running composition is checked as a whole composition would
// be, plus what a running set cannot do.
func TestMakeRefusesEdits(t *testing.T) {
	base := []entry{env, bash, tools}
	cases := []struct {
		name string
		next []entry
		// redescribed entries (not running, or another binary)
		described []entry
		want      []string
	}{
		{"an added entry closing a cycle", []entry{
			with(env, func(e *entry) { e.d.injects = []string{"X"} }), bash, tools,
			{id: "x", d: desc{provides: []string{"X"}, injects: []string{"shellEnv"}}},
		}, []entry{
			// env moves to a binary that injects X: same provides, other injects.
			with(env, func(e *entry) { e.bin = "/bin/env2"; e.d.injects = []string{"X"} }),
			{id: "x", d: desc{provides: []string{"X"}, injects: []string{"shellEnv"}}},
		}, []string{`plugin "env": /bin/env2 provides [shellEnv], injects [X], other keys than /bin/env`,
			`dependency cycle`}},
		{"an added cycle of new entries", append(slices.Clone(base),
			entry{id: "a", d: desc{provides: []string{"A"}, injects: []string{"B"}}},
			entry{id: "b", d: desc{provides: []string{"B"}, injects: []string{"A"}}},
		), []entry{
			{id: "a", d: desc{provides: []string{"A"}, injects: []string{"B"}}},
			{id: "b", d: desc{provides: []string{"B"}, injects: []string{"A"}}},
		}, []string{`c.yaml:40: plugin "a": dependency cycle`}},
		{"an added entry providing a core key", append(slices.Clone(base),
			entry{id: "j", d: desc{provides: []string{"jobs"}}}),
			[]entry{{id: "j", d: desc{provides: []string{"jobs"}}}},
			[]string{`c.yaml:40: plugin "j": service "jobs" is provided by the host itself`}},
		{"an added duplicate provider", append(slices.Clone(base),
			entry{id: "env2", d: desc{provides: []string{"shellEnv"}}}),
			[]entry{{id: "env2", d: desc{provides: []string{"shellEnv"}}}},
			[]string{`c.yaml:40: plugin "env2": service "shellEnv" is already provided by plugin "env" (c.yaml:10)`}},
		{"an added duplicate tool", append(slices.Clone(base),
			entry{id: "more", d: desc{tools: []string{"bash"}}}),
			[]entry{{id: "more", d: desc{tools: []string{"bash"}}}},
			[]string{`c.yaml:40: plugin "more": tool "bash" is already registered by plugin "tools"`}},
		{"removing a provider a running entry needs", []entry{env, tools}, nil,
			[]string{`c.yaml:20: plugin "tools": injects "shell", which plugin "bash" (c.yaml:20) provides: that plugin cannot be removed`}},
		{"disabling it", []entry{env, with(bash, func(e *entry) { e.disabled = true }), tools}, nil,
			[]string{`plugin "tools": injects "shell", which plugin "bash" (c.yaml:20) provides: that plugin cannot be removed`}},
		{"a move onto other keys", []entry{env, with(bash, func(e *entry) { e.bin = "/bin/probe" }), tools},
			[]entry{with(bash, func(e *entry) { e.bin = "/bin/probe"; e.d = desc{provides: []string{"probe"}} })},
			[]string{`plugin "bash": /bin/probe provides [probe], injects [], other keys than /bin/bash`,
				`plugin "tools": injects "shell", which no plugin of the composition provides`}},
		{"a rebuilt binary with other keys", base,
			[]entry{with(env, func(e *entry) { e.d.provides = []string{"shellEnv", "more"} })},
			[]string{`plugin "env": /bin/env provides [shellEnv more], injects [], other keys`}},
		{"an added entry naming by config a tool another has", []entry{env, bash, tools, with(pbash, toolName("job_output"))},
			[]entry{with(pbash, toolName("job_output"))},
			[]string{`c.yaml:40: plugin "pbash": tool "job_output" is already registered by plugin "tools" (c.yaml:30)`}},
		{"a config the running binary's schema refuses", []entry{env, with(bash, func(e *entry) { e.config = map[string]any{"x": 1} }), tools}, nil,
			[]string{`c.yaml:20`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Make(Input{Comp: comp(tc.next...), Described: described(tc.described...), Running: running(t, base...), Core: isCore})
			checkErrs(t, errs, tc.want)
		})
	}
}

// The steps that move a running set to an edit.
func TestMakeSteps(t *testing.T) {
	probe := entry{id: "probe", d: desc{provides: []string{"probe"}, injects: []string{"shellEnv"}}}
	user := entry{id: "user", d: desc{injects: []string{"probe"}}}
	base := []entry{env, bash, tools, probe, user}
	cases := []struct {
		name      string
		next      []entry
		described []entry
		want      string // "id:action" in plan order
	}{
		{"nothing changed", base, nil, "env:keep bash:keep tools:keep probe:keep user:keep"},
		{"a config change reloads", []entry{env, with(bash, func(e *entry) { e.config = map[string]any{"maxOutputBytes": 3} }), tools, probe, user}, nil,
			"env:keep bash:reload tools:keep probe:keep user:keep"},
		{"another binary moves", []entry{env, with(bash, func(e *entry) { e.bin = "/bin/bash2" }), tools, probe, user},
			[]entry{with(bash, func(e *entry) { e.bin = "/bin/bash2" })},
			"env:keep bash:move tools:keep probe:keep user:keep"},
		{"a rebuilt binary described again keeps unless forced", base, []entry{env}, "env:keep bash:keep tools:keep probe:keep user:keep"},
		{"removals go dependents first", []entry{env, bash, tools}, nil, "env:keep bash:keep tools:keep user:remove probe:remove"},
		{"removals go dependents first, whatever the file order", []entry{env, bash, tools}, nil, "env:keep bash:keep tools:keep user:remove probe:remove"},
		{"disabled is removed", []entry{env, bash, tools, probe, with(user, func(e *entry) { e.disabled = true })}, nil,
			"env:keep bash:keep tools:keep probe:keep user:remove"},
		{"a new entry is added in its place", []entry{env, {id: "late", d: desc{injects: []string{"shell"}}}, bash, tools, probe, user},
			[]entry{{id: "late", d: desc{injects: []string{"shell"}}}},
			"env:keep late:add bash:keep tools:keep probe:keep user:keep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := base
			if strings.Contains(tc.name, "whatever the file order") {
				run = []entry{env, bash, tools, user, probe}
			}
			p, errs := Make(Input{Comp: comp(tc.next...), Described: described(tc.described...), Running: running(t, run...), Core: isCore})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			var got []string
			for _, st := range p.Steps {
				got = append(got, fmt.Sprintf("%s:%s", st.ID, st.Action))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Fatalf("steps %s, want %s", g, tc.want)
			}
			for _, st := range p.Steps {
				if st.Action != Add && st.Was == nil {
					t.Errorf("%s: %s without the running entry", st.ID, st.Action)
				}
				if st.Action != Remove && st.Config == nil {
					t.Errorf("%s: no effective config", st.ID)
				}
			}
		})
	}
}

// A step's tools are its declared ones and those its config names; a
// running entry whose config renames its tool reloads, and is refused when
// the new name is another entry's.
func TestToolsFromConfig(t *testing.T) {
	toolsOf := func(p *Plan, id string) string {
		for _, st := range p.Steps {
			if st.ID == id {
				return fmt.Sprintf("%s %v", st.Action, st.Tools)
			}
		}
		return "no step"
	}
	bySchema := []entry{env, bash, with(tools, func(e *entry) { e.d.tools = []string{"job_output"} }), pbash}
	p, errs := Make(Input{Comp: comp(bySchema...), Described: described(bySchema...), Core: isCore})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got, want := toolsOf(p, "pbash"), "add [pbash_reset bash]"; got != want {
		t.Fatalf("by the schema's default: %s, want %s", got, want)
	}
	base := []entry{env, bash, tools, with(pbash, toolName("sh"))}
	run := running(t, base...)
	if got := fmt.Sprint(run[3].Tools); got != "[pbash_reset sh]" {
		t.Fatalf("by config: %s", got)
	}
	next := []entry{env, bash, tools, with(pbash, toolName("sh2"))}
	p, errs = Make(Input{Comp: comp(next...), Running: run, Core: isCore})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got, want := toolsOf(p, "pbash"), "reload [pbash_reset sh2]"; got != want {
		t.Fatalf("renamed: %s, want %s", got, want)
	}
	next = []entry{env, bash, tools, with(pbash, toolName("job_output"))}
	_, errs = Make(Input{Comp: comp(next...), Running: run, Core: isCore})
	checkErrs(t, errs, []string{`c.yaml:40: plugin "pbash": tool "job_output" is already registered by plugin "tools" (c.yaml:30)`})
}

// The effective config is the settings namespace under the entry's own.
func TestEffectiveConfig(t *testing.T) {
	c := comp(entry{id: "bash", config: map[string]any{"a": map[string]any{"x": 1}, "b": 2}})
	c.Settings["shell"] = map[string]any{"a": map[string]any{"y": 3}, "b": 1, "c": 4}
	got, err := EffectiveConfig(c, c.Plugins[0], &lifecycle.Description{SettingsNamespace: "shell"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"x":1,"y":3},"b":2,"c":4}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if c.Settings["shell"]["a"].(map[string]any)["x"] != nil {
		t.Fatal("merging wrote into the settings")
	}
}

// Every violation of a config is a problem of its own, at the value at
// fault: in the settings namespace the plugin reads, or in the entry's
// config; the problems come in the file's order.
func TestConfigProblemsEachAtTheirValue(t *testing.T) {
	c, err := composition.Parse("c.yaml", []byte(`settings:
  shell:
    timeoutMs: soon
plugins:
  - id: a
    path: /bin/a
    config:
      graceMs: x
      extra: 1
  - id: b
    path: /bin/b
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	schema := `{"type": "object", "additionalProperties": false, "properties": {"timeoutMs": {"type": "integer"}, "graceMs": {"type": "integer"}}}`
	d := &lifecycle.Description{SettingsNamespace: "shell", ConfigSchema: schema}
	_, errs := Make(Input{Comp: c, Described: map[string]Described{
		"a": {Binary: "/bin/a", Desc: d},
		"b": {Binary: "/bin/b", Desc: d},
	}})
	checkErrs(t, errs, []string{
		`c.yaml:3:16: plugin "a": settings.shell /timeoutMs: got string, want integer`,
		`c.yaml:3:16: plugin "b": settings.shell /timeoutMs: got string, want integer`,
		`c.yaml:8:16: plugin "a": config /graceMs: got string, want integer`,
		`c.yaml:9:7: plugin "a": config: unknown key "extra" (allowed: graceMs, timeoutMs)`,
	})
}
