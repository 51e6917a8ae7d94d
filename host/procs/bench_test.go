//go:build linux

package procs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/host/credential"
	"github.com/dshrun/dsh/internal/bounded"
)

// BenchmarkSpawnTrue is Spawn and wait of `bash -c true`, cgroup, limits
// and output collection included (NOCG=1: no cgroup; NOLIMITS=1: no
// limits, so the forking thread joins no v1 hierarchy); BenchmarkExecTrue
// is the os/exec floor.
func BenchmarkSpawnTrue(b *testing.B) {
	lim := Limits{}
	if os.Getenv("NOLIMITS") != "" {
		lim = Limits{Processes: -1, MemoryBytes: -1}
	}
	m, err := New(Config{SpillDir: filepath.Join(b.TempDir(), "spill"), NoCgroup: os.Getenv("NOCG") != "", Limits: lim})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(b.Context())
	dir := b.TempDir()
	for b.Loop() {
		p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", "true"}, Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		bounded.Receive(b, p.Done(), "the process's end")
		m.Forget(p.ID)
	}
}

func BenchmarkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScrub is the credential scrub of one environment of 60
// variables, as New does it once.
func BenchmarkScrub(b *testing.B) {
	env := []string{"DATABASE_URL=postgres://user:password@db:5432/app", "PATH=/usr/local/bin:/usr/bin:/bin", "GH_TOKEN=t", "lower_case_name=v"}
	for len(env) < 60 {
		env = append(env, "SOME_ORDINARY_VARIABLE_"+string(rune('A'+len(env)%26))+"=/some/ordinary/value:with/a/path")
	}
	s := credential.NewRule([]string{"DSN"}, []string{"GPG_KEY_ID"})
	for b.Loop() {
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			_ = s.Withholds(k, v)
		}
	}
}
