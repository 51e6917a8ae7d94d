// Package sandbox is the service definition of the host's sandbox services
// as plugins see them. Today that is ctx.sandboxPolicy: the key, the
// dsh.sandbox.v1 contract, and the Go seam over it ([Policies] and its
// error; [Client] implements it over a connection, usually
// sdk.Host.Conn(sandbox.PolicyKey); [NewServer] serves an implementation,
// and only these adapters deal in status codes). The host provides it
// from the composition's sandbox section (package host/core/sandbox).
package sandbox

import (
	"context"
	"errors"

	"github.com/dshrun/dsh/core/sandbox/sandboxv1"
)

// PolicyKey is the service key: ctx.sandboxPolicy.
const PolicyKey = "sandboxPolicy"

// PolicyServiceName is the gRPC service the host serves under PolicyKey.
var PolicyServiceName = sandboxv1.SandboxPolicy_ServiceDesc.ServiceName

// The sandbox modes, as the policy names them.
const (
	ReadOnly         = "read-only"
	WorkspaceWrite   = "workspace-write"
	DangerFullAccess = "danger-full-access"
)

// Policies is the ctx.sandboxPolicy seam as Go.
type Policies interface {
	// Get is the composition's policy, complete.
	Get(ctx context.Context) (*Policy, error)
}

// Policy is the contract's message.
type Policy = sandboxv1.Policy

// ErrNoPolicy is a composition without a sandbox section: nothing may
// sandbox under it.
var ErrNoPolicy = errors.New("no sandbox policy")
