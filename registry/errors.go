package registry

import (
	"errors"
	"fmt"
)

// ErrClosed is returned (wrapped) by Registry.Add once Registry.Close has
// been called.
var ErrClosed = errors.New("registry: closed")

// ErrInactive reports that a scope's admission is closed: services and
// effects can only be added while a scope is loading or active. The concrete
// error is an *InactiveError; match it with errors.Is(err, ErrInactive).
var ErrInactive = errors.New("registry: scope is not loading or active")

// DuplicateProviderError is returned by Scope.Provide when the key already
// has a live provider (visible, or reserved by a scope that is still
// loading). Only one scope may provide a key at a time.
type DuplicateProviderError struct {
	// Key is the service key both scopes want to provide.
	Key string
	// Owner is the label of the scope that tried to provide Key.
	Owner string
	// Existing is the label of the scope that currently provides Key.
	Existing string
}

// Error names the key and both scopes.
func (e *DuplicateProviderError) Error() string {
	return fmt.Sprintf("service %q is already provided by %s; %s cannot provide it", e.Key, e.Existing, e.Owner)
}

// InactiveError is returned when a service or effect is added to a scope
// whose admission is closed (it is pending, unloading, failed or disposed).
// It matches ErrInactive with errors.Is.
type InactiveError struct {
	// Scope is the label of the scope, e.g. `"x"` or `"env" (bin/dsh-shell-env)`.
	Scope string
	// State is the scope's state when the effect was refused.
	State State
	// What is the label of the refused effect, e.g. "service shell".
	What string
}

// Error says which scope refused what, and why.
func (e *InactiveError) Error() string {
	return fmt.Sprintf("scope %s is %s: cannot add effect %q", e.Scope, e.State, e.What)
}

// Unwrap makes errors.Is(err, ErrInactive) hold.
func (e *InactiveError) Unwrap() error { return ErrInactive }
