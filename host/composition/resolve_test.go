package composition

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

// loadTemp writes src as comp.yaml in a new directory and loads it.
func loadTemp(t *testing.T, src string) *Composition {
	t.Helper()
	file := filepath.Join(t.TempDir(), "comp.yaml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestResolveByName(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("executable bits")
	}
	root := t.TempDir()
	d1, d2, d3 := filepath.Join(root, "one"), filepath.Join(root, "two"), filepath.Join(root, "three")
	writeFile(t, filepath.Join(d1, "dsh-y"), 0o644)      // not executable: skipped
	writeFile(t, filepath.Join(d1, "dsh-z"), 0o644)      // not executable, and the only one
	writeFile(t, filepath.Join(d1, "dsh-w", "x"), 0o755) // dsh-w is a directory
	want := writeFile(t, filepath.Join(d2, "dsh-x"), 0o755)
	writeFile(t, filepath.Join(d3, "dsh-x"), 0o755)
	wantY := writeFile(t, filepath.Join(d3, "dsh-y"), 0o755)

	c := loadTemp(t, `plugins:
  - name: x
  - name: "@scope/dsh-y"
  - name: nosuch
  - name: z
  - name: w
`)
	dirs := []string{d1, "", d2, d3}
	if got, err := c.Resolve(c.Plugins[0], dirs); err != nil || got != want {
		t.Errorf("Resolve(x) = %q, %v; want the first match %q", got, err, want)
	}
	if got, err := c.Resolve(c.Plugins[1], dirs); err != nil || got != wantY {
		t.Errorf("Resolve(y) = %q, %v; want %q past the non-executable one", got, err, wantY)
	}

	_, err := c.Resolve(c.Plugins[2], dirs)
	wantMsg := `plugin "nosuch": binary "dsh-nosuch" not found; searched: ` + d1 + ", " + d2 + ", " + d3
	if err == nil || !strings.HasSuffix(err.Error(), ":4:5: "+wantMsg) || !strings.Contains(err.Error(), "comp.yaml") {
		t.Errorf("missing binary: err = %v\nwant <file>:4:5: %s", err, wantMsg)
	}
	var e *Error
	if !errors.As(err, &e) || e.Pos != c.Plugins[2].Pos || e.ID != "nosuch" {
		t.Errorf("missing binary: error %#v, want an *Error at the entry", err)
	}

	_, err = c.Resolve(c.Plugins[3], dirs)
	if err == nil || !strings.Contains(err.Error(), `binary "dsh-z" not found; searched: `) ||
		!strings.Contains(err.Error(), filepath.Join(d1, "dsh-z")+" is not executable (mode -rw-r--r--)") {
		t.Errorf("non-executable binary: err = %v", err)
	}
	_, err = c.Resolve(c.Plugins[4], dirs)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(d1, "dsh-w")+" is a directory") {
		t.Errorf("directory: err = %v", err)
	}

	_, err = c.Resolve(c.Plugins[0], nil)
	if err == nil || !strings.Contains(err.Error(), `binary "dsh-x" not found: no plugin directory to search`) {
		t.Errorf("no dirs: err = %v", err)
	}
}

func TestResolveByPath(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("executable bits")
	}
	elsewhere := writeFile(t, filepath.Join(t.TempDir(), "dsh-abs"), 0o755)
	c := loadTemp(t, `plugins:
  - path: ./bin/dsh-probe
  - path: bin/dsh-plain
  - path: ./bin/dsh-missing
  - path: ./bin
    id: dir
  - path: `+elsewhere+`
`)
	probe := writeFile(t, filepath.Join(c.Dir, "bin", "dsh-probe"), 0o755)
	writeFile(t, filepath.Join(c.Dir, "bin", "dsh-plain"), 0o600)
	other := t.TempDir() // the dirs do not matter for path entries
	writeFile(t, filepath.Join(other, "dsh-probe"), 0o755)

	if got, err := c.Resolve(c.Plugins[0], []string{other}); err != nil || got != probe {
		t.Errorf("Resolve(probe) = %q, %v; want %q", got, err, probe)
	}
	if got, err := c.Resolve(c.Plugins[4], nil); err != nil || got != elsewhere {
		t.Errorf("Resolve(absolute) = %q, %v; want %q", got, err, elsewhere)
	}
	cases := []struct {
		i    int
		want string
	}{
		{1, `:3:5: plugin "plain": binary "dsh-plain" (path "bin/dsh-plain", relative to ` + c.Dir + `): is not executable (mode -rw-------)`},
		{2, `:4:5: plugin "missing": binary "dsh-missing" (path "./bin/dsh-missing", relative to ` + c.Dir + `): does not exist`},
		{3, `:5:5: plugin "dir": binary "bin" (path "./bin", relative to ` + c.Dir + `): is a directory`},
	}
	for _, tc := range cases {
		_, err := c.Resolve(c.Plugins[tc.i], []string{other})
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("entry %d: err = %v\nwant ...%s", tc.i, err, tc.want)
		}
	}
}
