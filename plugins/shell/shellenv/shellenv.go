// Package shellenv is the service definition of ctx.shellEnv: the registry
// of trusted DSH_* facts that shell tools hand to every execution. It holds
// the Go contract ([Env]) and its errors, the fact registry a provider
// keeps ([Registry]), the gRPC adapters over the shellenvv1 protobuf
// contract ([Client] implements Env over a connection, [NewServer] serves
// an implementation; only they deal in status codes), and the [Follower]
// that keeps a consumer's snapshot current. It starts no processes and
// does no I/O.
package shellenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"

	"github.com/dshrun/dsh/plugins/shell/shellenv/shellenvv1"
)

// Key is the service key: ctx.shellEnv.
const Key = "shellEnv"

// ServiceName is the gRPC service that implements Key.
var ServiceName = shellenvv1.ShellEnv_ServiceDesc.ServiceName

// Owners of facts that no plugin registered.
const (
	OwnerBuiltin = "builtin"
	OwnerConfig  = "config"
)

// Env is the ctx.shellEnv contract: what a provider implements and what
// consumers call. The caller is the plugin the host names in the request
// (sdk.Caller). Errors are ErrRefused, the caller's context error, or the
// sdk vocabulary.
type Env interface {
	// Collect returns one trusted snapshot of every current fact.
	Collect(ctx context.Context) (Snapshot, error)
	// Register adds a fact owned by the caller until it unregisters it or
	// goes away.
	Register(ctx context.Context, name, value string) error
	Unregister(ctx context.Context, name string) error
	List(ctx context.Context) ([]Fact, error)
	// Watch calls send with the current snapshot, then with a new one
	// after every change, one at a time, until ctx ends (nil) or send
	// fails (its error). Optional: a provider without it fails with
	// sdk.ErrUnimplemented.
	Watch(ctx context.Context, send func(Snapshot) error) error
}

// ErrRefused is a registration or removal the registry refuses: a name
// that is no fact's, one another owner holds, one not registered.
var ErrRefused = errors.New("fact refused")

// Snapshot is a copy of the facts at one moment.
type Snapshot struct {
	Env        map[string]string
	Generation uint64
	// Stale is set on a snapshot a Follower kept because its provider
	// could not be reached.
	Stale bool
}

// Fact is one DSH_* variable and who owns it.
type Fact struct {
	Name, Value, Owner string
}

var factName = regexp.MustCompile(`^DSH_[A-Z0-9_]+$`)

// ValidName reports whether name may be a fact (DSH_ followed by upper-case
// letters, digits and underscores).
func ValidName(name string) bool { return factName.MatchString(name) }

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
	facts map[string]Fact
	gen   uint64
	// changed is closed (and replaced) at every change: the broadcast that
	// Watch waits on.
	changed chan struct{}
}

// NewRegistry returns a registry holding the built-in DSH_HOME fact.
func NewRegistry(home string) *Registry {
	r := &Registry{facts: map[string]Fact{}, changed: make(chan struct{})}
	r.facts["DSH_HOME"] = Fact{Name: "DSH_HOME", Value: home, Owner: OwnerBuiltin}
	r.gen = 1
	return r
}

// FactError explains a refused registration.
type FactError struct {
	Name, Owner, Reason string
}

func (e *FactError) Error() string {
	return fmt.Sprintf("shellEnv: fact %q (from %q): %s", e.Name, e.Owner, e.Reason)
}

func (e *FactError) Is(target error) bool { return target == ErrRefused }

// Register sets name=value for owner. A name owned by someone else is
// refused with the current owner named; the owner may update its own fact.
func (r *Registry) Register(owner, name, value string) error {
	if !ValidName(name) {
		return &FactError{name, owner, "names must match DSH_[A-Z0-9_]+"}
	}
	if owner == "" {
		return &FactError{name, owner, "no owner: facts are registered through the host"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.facts[name]; ok && cur.Owner != owner {
		return &FactError{name, owner, fmt.Sprintf("already registered by %q", cur.Owner)}
	}
	r.facts[name] = Fact{Name: name, Value: value, Owner: owner}
	r.bump()
	return nil
}

// Unregister removes owner's fact name.
func (r *Registry) Unregister(owner, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.facts[name]
	if !ok {
		return &FactError{name, owner, "not registered"}
	}
	if cur.Owner != owner {
		return &FactError{name, owner, fmt.Sprintf("owned by %q", cur.Owner)}
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
func (r *Registry) Collect() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot()
}

// Watch calls send with a snapshot now and after every change until ctx
// ends (nil) or send fails (its error). Changes made while send runs give
// one snapshot.
func (r *Registry) Watch(ctx context.Context, send func(Snapshot) error) error {
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

func (r *Registry) snapshot() Snapshot {
	env := make(map[string]string, len(r.facts))
	for name, f := range r.facts {
		env[name] = f.Value
	}
	return Snapshot{Env: env, Generation: r.gen}
}

// List returns every fact sorted by name.
func (r *Registry) List() []Fact {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Fact, 0, len(r.facts))
	for _, f := range r.facts {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
