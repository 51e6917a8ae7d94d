//go:build unix

package pluginproc

import (
	"context"
	"testing"
)

// BenchmarkStart is one plugin's start to its description and stop: the
// cost a composition pays per plugin (profile it with -cpuprofile).
func BenchmarkStart(b *testing.B) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		p, err := Start(ctx, Config{ID: "n", Binary: bin("noop")})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Stop(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
