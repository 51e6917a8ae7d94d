package sandbox

import (
	"github.com/dshrun/dsh/core/sandbox"
)

func prepareLandlock(p *sandbox.Policy, mode string, _ Options) (confinement, error) {
	c, err := Prepare(p, mode)
	if err != nil {
		return nil, err
	}
	return staleNever{c}, nil
}

type staleNever struct{ *Confinement }

func (staleNever) Stale() bool { return false }

func findBubblewrap() (wrapper, error) {
	b, err := FindBubblewrap()
	if err != nil {
		return nil, err
	}
	return b, nil
}
