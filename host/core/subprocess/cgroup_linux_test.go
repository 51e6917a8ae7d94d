package subprocess

import (
	"os"
	"path/filepath"
	"testing"
)

// pristine reads a cgroup's state with bare reads relative to its
// directory and counts child cgroups by link count: each change a command
// can make to its own cgroup must still keep it out of the pool.
func TestPristineSeesEveryChange(t *testing.T) {
	m := newManager(t)
	if !m.Cgroups() {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	c, err := m.cg.child()
	if err != nil {
		t.Fatal(err)
	}
	defer c.remove()
	if !c.pristine() {
		t.Fatal("a cgroup just made is not pristine")
	}
	sub := filepath.Join(c.dir, "made-by-the-command")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if c.pristine() {
		t.Fatal("a cgroup with a child cgroup counts as pristine")
	}
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	if !c.pristine() {
		t.Fatal("with its child removed, the cgroup is not pristine")
	}
	for _, f := range []struct{ name, value string }{
		{"cgroup.max.depth", "1"},
		{"cgroup.max.descendants", "3"},
		{"cgroup.freeze", "1"},
	} {
		if err := os.WriteFile(filepath.Join(c.dir, f.name), []byte(f.value), 0); err != nil {
			t.Fatal(err)
		}
		if c.pristine() {
			t.Fatalf("%s = %s counts as pristine", f.name, f.value)
		}
		want := "max"
		if f.name == "cgroup.freeze" {
			want = "0"
		}
		if err := os.WriteFile(filepath.Join(c.dir, f.name), []byte(want), 0); err != nil {
			t.Fatal(err)
		}
		if !c.pristine() {
			t.Fatalf("%s set back to %s: not pristine", f.name, want)
		}
	}
	// Read by path, as close does for what it finds left over.
	byPath := &cgroup{dir: c.dir, fd: -1}
	if !byPath.pristine() || !byPath.empty() {
		t.Fatal("read by path, the cgroup is not pristine and empty")
	}
}
