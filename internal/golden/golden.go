// Package golden checks texts against golden files: testdata/<name>.golden
// beside a test. A golden file holds a text someone reads (the model, a
// user), so a change to one is a deliberate change to what they see; `go
// test -update` rewrites them.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Check fails t unless got is testdata/<name>.golden; with -update it
// writes it instead.
func Check(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s changed:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
