//go:build !linux

package confine

// guard watches for what a confined command may not create; nothing is
// confined off Linux, so there is nothing to watch.
type guard struct{}

type undone struct{ path, why string }

func newGuard(roots, protected []string) *guard { return nil }

func (g *guard) paths() ([]string, uint64)              { return nil, 0 }
func (g *guard) mark() uint64                           { return 0 }
func (g *guard) settle(uint64, bool) ([]undone, uint64) { return nil, 0 }
func (g *guard) close()                                 {}
