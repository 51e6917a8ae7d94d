package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/sdk"
)

// The sentences a plugin on another protocol version meets, wherever dsh
// starts it.
func protocolSentences() map[string]string {
	return map[string]string{
		"oldproto": `plugin "oldproto" (` + filepath.Join(binDir, "dsh-oldproto") + `) speaks dsh plugin protocol 0; this dsh speaks 1: rebuild the plugin against a current dsh sdk, or run it with a dsh release that speaks protocol 0`,
		"newproto": `plugin "newproto" (` + filepath.Join(binDir, "dsh-newproto") + `) speaks dsh plugin protocol 2; this dsh speaks 1: upgrade dsh to a release that speaks protocol 2, or use a build of the plugin for protocol 1`,
	}
}

func TestPluginsText(t *testing.T) {
	out, errOut, code := dsh(t, nil, "plugins")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (some binaries would not load): %s", code, errOut)
	}
	blocks := map[string]string{}
	for _, b := range strings.Split(strings.TrimSuffix(out, "\n"), "\n\n") {
		name, _, _ := strings.Cut(b, " ")
		blocks[name] = b
	}
	want := map[string][]string{
		"shell-env":            {"shell-env 0.1.0  " + filepath.Join(binDir, "dsh-shell-env"), "  provides: ctx.shellEnv (dsh.shellenv.v1.ShellEnv)\n", "  config: facts object\n"},
		"tool-bash":            {"  injects: ctx.shell, ctx.shellEnv,", "  tools: bash, job_output, job_kill, job_list\n", "  config: maxOutputChars integer\n"},
		"tool-bash-persistent": {"  tools: named by config: toolName\n", "toolName string"},
		"bash-local":           {"  settings: shell (merged under config)"},
		"noop":                 {"noop 0.0.1  ", "  config: any (no schema)"},
		// A second provider of ctx.shell is no failure: a composition picks one.
		"bash-sandbox": {"  provides: ctx.shell (dsh.shell.v1.Shell)"},
		"probe":        {"ctx.shellEnv"},
		"chatty":       {"  would not load: ", "not a dsh plugin, or it wrote to stdout before its handshake"},
		"baddesc":      {"  would not load: ", `describe: plugin "baddesc": key "missing" declares gRPC service "dsh.missing.v1.Missing", which the plugin does not register`},
	}
	for name, s := range protocolSentences() {
		want[name] = []string{name + "  " + filepath.Join(binDir, "dsh-"+name) + "\n  would not load: " + s + "\n"}
	}
	for name, parts := range want {
		b, ok := blocks[name]
		if !ok {
			t.Errorf("%s not listed:\n%s", name, out)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(b+"\n", p) {
				t.Errorf("%s lacks %q:\n%s", name, p, b)
			}
		}
	}
	failing := 0
	for name, b := range blocks {
		if strings.Contains(b, "would not load") {
			failing++
			if _, ok := map[string]bool{"chatty": true, "baddesc": true, "oldproto": true, "newproto": true}[name]; !ok {
				t.Errorf("%s flagged:\n%s", name, b)
			}
		}
	}
	if w := "dsh plugins: 4 of "; failing != 4 || !strings.Contains(errOut, w) {
		t.Errorf("%d flagged; stderr lacks %q:\n%s", failing, w, errOut)
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("plugins left processes: %v", left)
	}
}

func TestPluginsJSON(t *testing.T) {
	out, errOut, code := dsh(t, nil, "plugins", "--json")
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	type line struct {
		Binary      string
		Error       string
		Description *struct {
			Name         string
			Provides     []struct{ Key string }
			Tools        []string
			ConfigSchema string
		}
	}
	got := map[string]line{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got[strings.TrimPrefix(filepath.Base(v.Binary), "dsh-")] = v
	}
	env := got["shell-env"].Description
	if env == nil || env.Name != "shell-env" || len(env.Provides) != 1 || env.Provides[0].Key != "shellEnv" || !strings.Contains(env.ConfigSchema, `"facts"`) {
		t.Errorf("shell-env: %+v", got["shell-env"])
	}
	if d := got["tool-bash"].Description; d == nil || strings.Join(d.Tools, ",") != "bash,job_output,job_kill,job_list" {
		t.Errorf("tool-bash: %+v", got["tool-bash"])
	}
	for name, s := range protocolSentences() {
		if got[name].Error != s || got[name].Description != nil {
			t.Errorf("%s: %+v, want error %q", name, got[name], s)
		}
	}
	if !strings.Contains(got["baddesc"].Error, "describe: ") {
		t.Errorf("baddesc: %+v", got["baddesc"])
	}
}

// A plugin on an older or a newer protocol version stops validate and
// serve with the one sentence that names both versions.
func TestProtocolVersions(t *testing.T) {
	if sdk.ProtocolVersion != 1 {
		t.Fatalf("the sentences below name protocol 1; this dsh speaks %d", sdk.ProtocolVersion)
	}
	for name, sentence := range protocolSentences() {
		f := comp(t, "plugins:\n  - id: "+name+"\n    name: "+name+"\n")
		for _, cmd := range []string{"validate", "serve"} {
			out, errOut, code := dsh(t, nil, cmd, f)
			if code != 2 || out != "" {
				t.Errorf("%s %s: exit %d, stdout %q; want 2 and nothing", cmd, name, code, out)
			}
			if want := "dsh " + cmd + ": " + f + ":2:5: " + sentence + "\n"; !strings.Contains(errOut, want) {
				t.Errorf("%s %s: stderr lacks %q:\n%s", cmd, name, want, errOut)
			}
		}
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("left processes: %v", left)
	}
}
