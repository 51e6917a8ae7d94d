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
	c   confinement
	tmp string            // the owner's temporary folder (Options.Tmp)
	env map[string]string // what a command's environment holds under it

	mu     sync.RWMutex
	closed bool
}

// errReleased is a spawn under a confinement released with its owner.
var errReleased = errors.New("the confinement was released with its owner (ask ctx.sandbox to wrap the command again)")

func hold(c confinement, tmp, mode string) *held {
	return &held{c: c, tmp: tmp, env: tmpEnv(tmp, mode)}
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
	return h.c.Close()
}

// Env is what the environment of a command spawned under token must hold
// (TMPDIR, when the command has a private temporary folder): the spawner
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

// Release closes the confinements made for the owner whose temporary
// folder is tmp (its commands are gone): a later wrap makes them anew.
func (r *Runner) Release(tmp string) error {
	if tmp == "" {
		return nil
	}
	r.mu.Lock()
	var gone []confinement
	for token, c := range r.prepared {
		if h, ok := c.(*held); ok && h.tmp == tmp {
			gone = append(gone, c)
			delete(r.prepared, token)
		}
	}
	r.retired = slices.DeleteFunc(r.retired, func(c confinement) bool {
		h, ok := c.(*held)
		if ok && h.tmp == tmp {
			gone = append(gone, c)
		}
		return ok && h.tmp == tmp
	})
	r.mu.Unlock()
	var errs []error
	for _, c := range gone {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
