package confine

import (
	"errors"
	"maps"
	"slices"
	"sync"
)

// held is a confinement the runner holds for an owner's commands: closed
// when the owner is released, never while a Confine is applying it (its
// descriptors would be gone, or another file's).
type held struct {
	c     confinement
	tmp   string            // the owner's temporary folder (Options.Tmp)
	owner string            // Options.Owner, when the token names it (a proxied policy's)
	box   *netBox           // a proxied policy's proxy; nil for none
	env   map[string]string // what a command's environment holds under it

	mu     sync.RWMutex
	closed bool
}

// errReleased is a spawn under a confinement released with its owner.
var errReleased = errors.New("the confinement was released with its owner (ask ctx.sandbox to wrap the command again)")

func hold(c confinement, opt Options, mode string, box *netBox) *held {
	h := &held{c: c, tmp: opt.Tmp, env: tmpEnv(opt.Tmp, mode), box: box}
	if box != nil {
		h.owner = opt.Owner
		if h.env == nil {
			h.env = map[string]string{}
		}
		maps.Copy(h.env, proxyEnv())
	}
	return h
}

func (h *held) Confine() error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return errReleased
	}
	return h.c.Confine()
}

func (h *held) Stale() bool { return h.c.Stale() }

func (h *held) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	return errors.Join(h.c.Close(), h.box.close())
}

// Env is what the environment of a command spawned under token must hold
// (TMPDIR, when the command has a private temporary folder; the proxy's
// variables, when its policy is proxied): the spawner
// sets it over the request's own variables, as the bubblewrap runner's
// --setenv does.
func (r *Runner) Env(token string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.prepared[token].(*held); ok {
		return maps.Clone(h.env)
	}
	return nil
}

// Release closes the confinements made for owner, whose temporary folder
// is tmp ("" for none), and their proxies (its commands are gone): a
// later wrap makes them anew.
func (r *Runner) Release(owner, tmp string) error {
	mine := func(c confinement) bool {
		h, ok := c.(*held)
		return ok && ((tmp != "" && h.tmp == tmp) || (owner != "" && h.owner == owner))
	}
	r.mu.Lock()
	var gone []confinement
	for token, c := range r.prepared {
		if mine(c) {
			gone = append(gone, c)
			delete(r.prepared, token)
		}
	}
	r.retired = slices.DeleteFunc(r.retired, func(c confinement) bool {
		if mine(c) {
			gone = append(gone, c)
			return true
		}
		return false
	})
	for _, c := range gone {
		if b := c.(*held).box; b != nil {
			delete(r.nets, b.id)
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, c := range gone {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
