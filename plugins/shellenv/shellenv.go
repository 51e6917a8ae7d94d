// Package shellenv is the service definition of ctx.shellEnv: the registry
// of trusted DSH_* facts that shell tools hand to every execution. It holds
// the Go contract ([Env]) and its errors, the gRPC adapters over the
// shellenvv1 protobuf contract ([Client] implements Env over a connection,
// [NewServer] serves an implementation; only they deal in status codes),
// and the [Follower] that keeps a consumer's snapshot current. It starts no
// processes and does no I/O.
package shellenv

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/dshrun/dsh/plugins/shellenv/shellenvv1"
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

// FactError explains a refused registration.
type FactError struct {
	Name, Owner, Reason string
}

func (e *FactError) Error() string {
	return fmt.Sprintf("shellEnv: fact %q (from %q): %s", e.Name, e.Owner, e.Reason)
}

func (e *FactError) Is(target error) bool { return target == ErrRefused }
