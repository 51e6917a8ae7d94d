package subprocess

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
		<-p.Done()
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
