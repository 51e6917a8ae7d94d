package shellenv

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// store is the fact registry the adapter tests serve: owned facts, a
// generation, and a broadcast at every change. The provider's registry is
// the shell-env plugin's.
type store struct {
	mu      sync.Mutex
	facts   map[string]Fact
	gen     uint64
	changed chan struct{} // closed and replaced at every change
}

func newStore(home string) *store {
	return &store{
		facts:   map[string]Fact{"DSH_HOME": {Name: "DSH_HOME", Value: home, Owner: OwnerBuiltin}},
		gen:     1,
		changed: make(chan struct{}),
	}
}

func (s *store) Register(owner, name, value string) error {
	if !ValidName(name) {
		return &FactError{Name: name, Owner: owner, Reason: "names must match DSH_[A-Z0-9_]+"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.facts[name]; ok && cur.Owner != owner {
		return &FactError{Name: name, Owner: owner, Reason: fmt.Sprintf("already registered by %q", cur.Owner)}
	}
	s.facts[name] = Fact{Name: name, Value: value, Owner: owner}
	s.bump()
	return nil
}

func (s *store) Unregister(owner, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.facts[name]; !ok || cur.Owner != owner {
		return &FactError{Name: name, Owner: owner, Reason: "not registered by this owner"}
	}
	delete(s.facts, name)
	s.bump()
	return nil
}

// bump records a change; s.mu is held.
func (s *store) bump() {
	s.gen++
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *store) Collect() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot()
}

// snapshot copies the facts; s.mu is held.
func (s *store) snapshot() Snapshot {
	env := make(map[string]string, len(s.facts))
	for name, f := range s.facts {
		env[name] = f.Value
	}
	return Snapshot{Env: env, Generation: s.gen}
}

func (s *store) List() []Fact {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fact, 0, len(s.facts))
	for _, f := range s.facts {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Watch sends a snapshot now and after every change until ctx ends or send
// fails.
func (s *store) Watch(ctx context.Context, send func(Snapshot) error) error {
	for {
		s.mu.Lock()
		snap, changed := s.snapshot(), s.changed
		s.mu.Unlock()
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
