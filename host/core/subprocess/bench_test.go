//go:build linux

package subprocess

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/host/credential"
	"github.com/dshrun/dsh/internal/bounded"
)

// BenchmarkSpawnTrue is Spawn and wait of `bash -c true`, cgroup and
// output collection included; BenchmarkExecTrue is the os/exec floor.
func BenchmarkSpawnTrue(b *testing.B) {
	m, err := New(Config{SpillDir: filepath.Join(b.TempDir(), "spill"), NoCgroup: os.Getenv("NOCG") != ""})
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
