package confine

import (
	"github.com/dshrun/dsh/core/sandbox"
)

func prepareLandlock(p *sandbox.Policy, mode string, opt Options) (confinement, error) {
	c, err := Prepare(p, mode, opt)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func findBubblewrap() (wrapper, error) {
	b, err := FindBubblewrap()
	if err != nil {
		return nil, err
	}
	return b, nil
}
