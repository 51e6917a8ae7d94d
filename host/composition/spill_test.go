package composition

import (
	"reflect"
	"strings"
	"testing"
)

func TestSpillBudgets(t *testing.T) {
	c := mustParse(t, "host:\n  spill: {total: 64MiB, perOwner: 1000000}\nplugins: []\n", nil)
	if c.Host.Spill != (Spill{Total: 64 << 20, PerOwner: 1_000_000}) {
		t.Fatalf("spill = %+v", c.Host.Spill)
	}
	if got := c.Masked()["host"].(map[string]any)["spill"]; !reflect.DeepEqual(got, map[string]any{"total": int64(64 << 20), "perOwner": int64(1_000_000)}) {
		t.Errorf("masked host.spill = %#v", got)
	}
	if c := mustParse(t, "plugins: []\n", nil); c.Host.Spill != (Spill{}) || c.Masked()["host"].(map[string]any)["spill"] != nil {
		t.Errorf("no host.spill: %+v", c.Host.Spill)
	}
	for src, want := range map[string]string{
		"host:\n  spill: {perOwner: 0}\n":                 `x.yaml:2:21: bad size for host.spill.perOwner: got the number 0`,
		"host:\n  spill: {total: 1TiB}\n":                 `bad size for host.spill.total: got the string "1TiB"`,
		"host:\n  spill: {totl: 1}\n":                     `unknown host.spill key "totl" (allowed: total, perOwner)`,
		"host:\n  spill: 5\n":                             `host.spill must be a map with total and perOwner, got the number 5`,
		"host:\n  spill: {total: 1MiB, perOwner: 2MiB}\n": `host.spill.perOwner (2097152 bytes) is more than the host's total (1048576 bytes)`,
		"host:\n  spill:\n    perOwner: 2GiB\n":           `x.yaml:3:15: host.spill.perOwner (2147483648 bytes) is more than the host's total (1073741824 bytes)`,
	} {
		_, err := Parse("compositions/x.yaml", []byte(src+"plugins: []\n"), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", src, err, want)
		}
	}
}
