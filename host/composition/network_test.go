package composition

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSandboxNetworkMap(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": "/nonexistent-home"}
	good := `sandbox:
  workspaceRoot: .
  network:
    allow: [registry.npmjs.org, "*.pypi.org", "git.test:443", "127.0.0.1:4873"]
    deny: [evil.pypi.org]
    mode: limited
    hosts: {git.test: 127.0.0.1}
plugins: []
`
	c, err := loadSandbox(t, dir, good, env)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Sandbox.NetworkRules
	if c.Sandbox.Network || r == nil || r.Mode != NetworkLimited ||
		!slices.Equal(r.Allow, []string{"registry.npmjs.org", "*.pypi.org", "git.test:443", "127.0.0.1:4873"}) ||
		!slices.Equal(r.Deny, []string{"evil.pypi.org"}) || !maps.Equal(r.Hosts, map[string]string{"git.test": "127.0.0.1"}) {
		t.Fatalf("network map read as network=%v %+v", c.Sandbox.Network, r)
	}
	if !strings.Contains(c.Sandbox.String(), "network proxy (limited): 4 allowed, 1 denied, 1 hosts") {
		t.Fatalf("one line: %s", c.Sandbox.String())
	}
	m, _ := c.Masked()["sandbox"].(map[string]any)
	if n, ok := m["network"].(map[string]any); !ok || n["mode"] != NetworkLimited {
		t.Fatalf("dsh config shows the network as %v", m["network"])
	}

	c, err = loadSandbox(t, dir, "sandbox:\n  workspaceRoot: .\n  network: {allow: [a.test]}\nplugins: []\n", env)
	if err != nil || c.Sandbox.NetworkRules.Mode != NetworkFull {
		t.Fatalf("mode defaults to full: %+v %v", c.Sandbox.NetworkRules, err)
	}
	c, err = loadSandbox(t, dir, "sandbox:\n  workspaceRoot: .\n  network: false\nplugins: []\n", env)
	if err != nil || c.Sandbox.Network || c.Sandbox.NetworkRules != nil {
		t.Fatalf("network false: %+v %v", c.Sandbox, err)
	}

	for _, bad := range []struct{ yaml, want string }{
		{"sandbox:\n  workspaceRoot: .\n  network: yes please\nplugins: []\n", "comp.yaml:3:12: sandbox.network must be true, false or a map"},
		{"sandbox:\n  workspaceRoot: .\n  network:\n    allow:\n      - a.test\n      - \"*.\"\nplugins: []\n", "comp.yaml:6:9: sandbox.network.allow: "},
		{"sandbox:\n  workspaceRoot: .\n  network:\n    deny: [\"exa mple.com\"]\nplugins: []\n", "comp.yaml:4:12: sandbox.network.deny: "},
		{"sandbox:\n  workspaceRoot: .\n  network: {allow: a.test}\nplugins: []\n", "sandbox.network.allow must be a list of domains"},
		{"sandbox:\n  workspaceRoot: .\n  network: {mode: readonly}\nplugins: []\n", "sandbox.network.mode: want full"},
		{"sandbox:\n  workspaceRoot: .\n  network: {hosts: {a.test: not-an-ip}}\nplugins: []\n", "sandbox.network.hosts: "},
		{"sandbox:\n  workspaceRoot: .\n  network: {allowed: [a.test]}\nplugins: []\n", `unknown sandbox.network key "allowed"`},
	} {
		_, err := loadSandbox(t, dir, bad.yaml, env)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: got %v, want %q", bad.yaml, err, bad.want)
		}
	}
}
