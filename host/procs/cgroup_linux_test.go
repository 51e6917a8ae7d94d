package procs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/bounded"
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

// Every way a command runs gives its cgroup back once it has ended: a
// spawned process and a foreground Run (which waits on its caller's
// goroutine) back to the pool; a terminal either back to the pool or, when
// its tree had to be killed at close (a poisoned cgroup), removed. In one
// manager, each after the other.
func TestEveryEndGivesTheCgroupBack(t *testing.T) {
	m := newManager(t)
	if !m.Cgroups() {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	// released waits for p's cgroup to be let go and the pool to hold idle
	// of made (idle < 0: at most one; made < 0: any).
	released := func(what string, p *Process, idle, made int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			p.cgMu.Lock()
			held := p.cg != nil
			p.cgMu.Unlock()
			m.cg.mu.Lock()
			i, n := len(m.cg.idle), m.cg.made
			m.cg.mu.Unlock()
			if !held && (i == idle || idle < 0 && i <= 1) && (n == made || made < 0) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s: cgroup still held %v, %d idle of %d made (want %d of %d)", what, held, i, n, idle, made)
			}
			time.Sleep(time.Millisecond)
		}
	}
	p, err := m.Spawn(Spec{Argv: []string{"true"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	released("a spawned process", p, 1, 1)
	if p, err = m.Run(Spec{Argv: []string{"true"}, Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	released("a foreground run", p, 1, 1)
	term := shellOn(t, m, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := term.Close(ctx); err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, term.Done(), "the terminal's end")
	released("a closed terminal", term.p, -1, 1)
	if p, err = m.Run(Spec{Argv: []string{"true"}, Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	released("a run after the terminal", p, 1, -1)
}
