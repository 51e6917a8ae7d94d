package retention

import (
	"bytes"
	"testing"
)

// BenchmarkWrite measures Write throughput into full retainers of a 1 KiB
// and a 64 KiB budget, in 32 KiB chunks.
func BenchmarkWrite(b *testing.B) {
	chunk := bytes.Repeat([]byte("some output line with ünïcödé € 😀\n"), 32<<10/40)
	for _, s := range []Strategy{Tail, HeadTail, Head} {
		for _, budget := range []int{1 << 10, 64 << 10} {
			name := s.String() + "/" + map[int]string{1 << 10: "1KiB", 64 << 10: "64KiB"}[budget]
			b.Run(name, func(b *testing.B) {
				r := NewTextRetainer(s, budget)
				b.SetBytes(int64(len(chunk)))
				b.ReportAllocs()
				for b.Loop() {
					r.Write(chunk)
				}
			})
		}
	}
}

// BenchmarkResult measures rendering the result of a full 64 KiB retainer.
func BenchmarkResult(b *testing.B) {
	r := NewTextRetainer(HeadTail, 64<<10)
	chunk := bytes.Repeat([]byte("some output line\n"), 1<<14)
	r.Write(chunk)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Result().String()
	}
}
