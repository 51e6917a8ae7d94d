// Package docs checks the documentation against the module as it is: the
// code shown in README.md and docs/ builds, the plugin guide's tool runs
// under dsh call, and every link between those pages leads somewhere.
package docs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// pages lists README.md and every page under docs/, relative to the module
// root.
func pages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	return out
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Every Go program in the documentation builds (the plugin a third party
// writes first). Each is laid over a folder of this module, so it compiles
// with the module's own packages and requirements.
func TestReadmeExamplesBuild(t *testing.T) {
	root := moduleRoot(t)
	programs := 0
	for _, page := range pages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range goBlock.FindAllSubmatch(text, -1) {
			if !regexp.MustCompile(`(?m)^package main$`).Match(b[1]) {
				continue
			}
			programs++
			tmp := t.TempDir()
			src := filepath.Join(tmp, "main.go")
			if err := os.WriteFile(src, b[1], 0o600); err != nil {
				t.Fatal(err)
			}
			// A folder of the module that does not exist: the overlay makes it.
			dir := filepath.Join(root, "internal", "docs", "example")
			overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(dir, "main.go"): src}})
			ov := filepath.Join(tmp, "overlay.json")
			if err := os.WriteFile(ov, overlay, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("go", "build", "-overlay", ov, "-o", filepath.Join(tmp, "example"), "./internal/docs/example")
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s Go block %d does not build: %v\n%s", page, i+1, err, out)
			}
		}
	}
	if programs == 0 {
		t.Fatal("neither README.md nor docs/ shows a Go program (package main)")
	}
}
