// Package docs checks that the code shown in README.md builds against the
// module as it is.
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

// Every Go program in README.md builds (the plugin a third party writes
// first). Each is laid over a folder of this module, so it compiles with the
// module's own packages and requirements.
func TestReadmeExamplesBuild(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllSubmatch(readme, -1)
	programs := 0
	for i, b := range blocks {
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
			t.Errorf("README.md Go block %d does not build: %v\n%s", i+1, err, out)
		}
	}
	if programs == 0 {
		t.Fatal("README.md shows no Go program (package main)")
	}
}
