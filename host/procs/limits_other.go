//go:build !linux

package procs

import "github.com/dshrun/dsh/core/subprocess"

// v1join is Linux's: no limits are enforced elsewhere.
type v1join struct{}

func (p *Process) forkJoin() *v1join                 { return nil }
func (p *Process) limitHits() []*subprocess.LimitHit { return nil }
