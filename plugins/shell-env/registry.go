package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/dshrun/dsh/plugins/shellenv"
)

// DefaultHome is DSH_HOME from lookup, else ~/.dsh.
func DefaultHome(lookup func(string) (string, bool)) string {
	if v, ok := lookup("DSH_HOME"); ok && v != "" {
		return v
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "/"
	}
	return filepath.Join(home, ".dsh")
}

// Registry holds facts with their owners. The zero value is not usable; use
// NewRegistry. Safe for concurrent use.
type Registry struct {
	mu    sync.Mutex
	facts map[string]shellenv.Fact
	gen   uint64
	// changed is closed (and replaced) at every change: the broadcast that
	// Watch waits on.
	changed chan struct{}
}

// NewRegistry returns a registry holding the built-in DSH_HOME fact.
func NewRegistry(home string) *Registry {
	r := &Registry{facts: map[string]shellenv.Fact{}, changed: make(chan struct{})}
	r.facts["DSH_HOME"] = shellenv.Fact{Name: "DSH_HOME", Value: home, Owner: shellenv.OwnerBuiltin}
	r.gen = 1
	return r
}

// Register sets name=value for owner. A name owned by someone else is
// refused with the current owner named; the owner may update its own fact.
func (r *Registry) Register(owner, name, value string) error {
	if !shellenv.ValidName(name) {
		return &shellenv.FactError{Name: name, Owner: owner, Reason: "names must match DSH_[A-Z0-9_]+"}
	}
	if owner == "" {
		return &shellenv.FactError{Name: name, Owner: owner, Reason: "no owner: facts are registered through the host"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.facts[name]; ok && cur.Owner != owner {
		return &shellenv.FactError{Name: name, Owner: owner, Reason: fmt.Sprintf("already registered by %q", cur.Owner)}
	}
	r.facts[name] = shellenv.Fact{Name: name, Value: value, Owner: owner}
	r.bump()
	return nil
}

// Unregister removes owner's fact name.
func (r *Registry) Unregister(owner, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.facts[name]
	if !ok {
		return &shellenv.FactError{Name: name, Owner: owner, Reason: "not registered"}
	}
	if cur.Owner != owner {
		return &shellenv.FactError{Name: name, Owner: owner, Reason: fmt.Sprintf("owned by %q", cur.Owner)}
	}
	delete(r.facts, name)
	r.bump()
	return nil
}

// Release removes every fact owner registered and returns how many.
func (r *Registry) Release(owner string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for name, f := range r.facts {
		if f.Owner == owner {
			delete(r.facts, name)
			n++
		}
	}
	if n > 0 {
		r.bump()
	}
	return n
}

// bump records a change; r.mu is held.
func (r *Registry) bump() {
	r.gen++
	close(r.changed)
	r.changed = make(chan struct{})
}

// Collect returns a snapshot; later changes do not affect it.
func (r *Registry) Collect() shellenv.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot()
}

// Watch calls send with a snapshot now and after every change until ctx
// ends (nil) or send fails (its error). Changes made while send runs give
// one snapshot.
func (r *Registry) Watch(ctx context.Context, send func(shellenv.Snapshot) error) error {
	for {
		r.mu.Lock()
		snap, changed := r.snapshot(), r.changed
		r.mu.Unlock()
		if err := send(snap); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

func (r *Registry) snapshot() shellenv.Snapshot {
	env := make(map[string]string, len(r.facts))
	for name, f := range r.facts {
		env[name] = f.Value
	}
	return shellenv.Snapshot{Env: env, Generation: r.gen}
}

// List returns every fact sorted by name.
func (r *Registry) List() []shellenv.Fact {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]shellenv.Fact, 0, len(r.facts))
	for _, f := range r.facts {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
