//go:build linux

package procs

import (
	"testing"

	"github.com/dshrun/dsh/internal/notify"
)

// A stream's write with nobody following: what Follow costs the output
// path (one atomic load).
func BenchmarkStreamWrite(b *testing.B) {
	m, err := New(Config{SpillDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(b.Context())
	spec := Spec{Owner: "bench", MaxOutputBytes: DefaultMaxOutputBytes, MaxSpillBytes: 1 << 40}
	s := newStream(m, spec, "p0", "stdout", &notify.Set{})
	s.spilling = true   // no spill file: the bytes go to the tail only
	s.reason = SpillCap // and are counted lost
	chunk := make([]byte, 512)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = s.Write(chunk)
	}
}
