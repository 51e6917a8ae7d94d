// Package transcript checks what the model reads back from a session of
// typical agent commands, run through the real binaries, against golden
// files. Run with -update to rewrite them after a deliberate change.
package transcript

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/agentsession"
	"github.com/dshrun/dsh/internal/testplugins"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var binDir string

func TestMain(m *testing.M) { testplugins.Main(m, "dsh-transcript-", &binDir) }

func TestTranscript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	home := t.TempDir()
	repo := filepath.Join(home, "calc")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := agentsession.Repo(repo); err != nil {
		t.Fatal(err)
	}
	rs, err := agentsession.Run(ctx, binDir, repo, home, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 20 {
		t.Fatalf("%d steps, want at least 20", len(rs))
	}
	var b strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&b, "=== %02d %s (%s %v)\n", i+1, r.Step.Name, r.Step.Tool, r.Step.Args)
		fmt.Fprintf(&b, "%s\n--- isError: %v\n\n", r.Text, r.IsError)
	}
	got := agentsession.Placeholders(b.String(), repo, home)
	golden := filepath.Join("testdata", "transcript.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		gotFile := filepath.Join(t.TempDir(), "transcript.got")
		_ = os.WriteFile(gotFile, []byte(got), 0o644)
		t.Fatalf("the transcript differs from %s; got is in %s:\n%s", golden, gotFile, firstDiff(string(want), got))
	}
}

// firstDiff shows the first line that differs, with a little context.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, wl, gl)
		}
	}
	return ""
}
