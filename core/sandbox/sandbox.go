// Package sandbox is the service definition of the host's sandbox services
// as plugins see them: ctx.sandboxPolicy (the composition's policy) and
// ctx.sandbox (the runner that confines a command under a per-call
// policy). It holds their keys, the dsh.sandbox.v1 contract, and the Go
// seams over it ([Policies], [Sandboxes] and their errors; [Client] and
// [RunnerClient] implement them over a connection, usually
// sdk.Host.Conn(key); [NewServer] and [NewRunnerServer] serve an
// implementation, and only these adapters deal in status codes). The host
// provides both (package host/confine).
package sandbox

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/sandbox/sandboxv1"
)

// PolicyKey is the service key: ctx.sandboxPolicy.
const PolicyKey = "sandboxPolicy"

// PolicyServiceName is the gRPC service the host serves under PolicyKey.
var PolicyServiceName = sandboxv1.SandboxPolicy_ServiceDesc.ServiceName

// Key is the runner's service key: ctx.sandbox.
const Key = "sandbox"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = sandboxv1.Sandbox_ServiceDesc.ServiceName

// The runners.
const (
	// RunnerLandlock restricts one thread of the host (Landlock, mount
	// and network namespaces, seccomp, no capabilities), which forks the
	// command: no second exec.
	RunnerLandlock = "landlock"
	// RunnerBubblewrap wraps the command line in bwrap, for machines
	// where the first is missing.
	RunnerBubblewrap = "bubblewrap"
)

// The sandbox modes, as the policy names them.
const (
	ReadOnly         = "read-only"
	WorkspaceWrite   = "workspace-write"
	DangerFullAccess = "danger-full-access"
)

// ForMode is the complete per-call policy a command confined in mode gets
// under the composition's policy base (what Wrap is asked to apply):
// writable and cache roots only in workspace-write, the network always in
// danger-full-access (else base's, with its proxy rules), base's protected
// paths and unix sockets.
func ForMode(base *Policy, mode string) *Policy {
	p := &Policy{
		DefaultMode:    mode,
		Network:        base.GetNetwork() || mode == DangerFullAccess,
		ProtectedPaths: slices.Clone(base.GetProtectedPaths()),
		UnixSockets:    slices.Clone(base.GetUnixSockets()),
	}
	if !p.Network && base.GetNetworkRules() != nil {
		p.NetworkRules = proto.Clone(base.GetNetworkRules()).(*NetworkRules)
	}
	if mode == WorkspaceWrite {
		p.WorkspaceRoot, p.WritableRoots = base.GetWorkspaceRoot(), slices.Clone(base.GetWritableRoots())
		p.CacheRoots = slices.Clone(base.GetCacheRoots())
	}
	return p
}

// Policies is the ctx.sandboxPolicy seam as Go.
type Policies interface {
	// Get is the composition's policy, complete.
	Get(ctx context.Context) (*Policy, error)
}

// Sandboxes is the ctx.sandbox seam as Go.
type Sandboxes interface {
	// Wrap confines argv under a complete per-call policy: what to spawn,
	// and the confinement ctx.subprocess applies to it. ErrUnavailable
	// means nothing may run.
	Wrap(ctx context.Context, req *WrapRequest) (*Wrapped, error)
	// Settle, once the command has ended and before its result is
	// returned, undoes what it created that no runner could stop (a new
	// git directory, a protected path that did not exist), and says what.
	Settle(ctx context.Context, req *SettleRequest) (*Settled, error)
}

// The messages of the seams, as the contract defines them.
type (
	Policy      = sandboxv1.Policy
	WrapRequest = sandboxv1.WrapRequest
	Wrapped     = sandboxv1.Wrapped
	// SettleRequest names a Wrapped's settle.
	SettleRequest = sandboxv1.SettleRequest
	// Settled is what was undone.
	Settled = sandboxv1.Settled
	// Undone is one path undone, and why.
	Undone = sandboxv1.Undone
	// NetworkRules are what the host's proxy lets a command reach.
	NetworkRules = sandboxv1.NetworkRules
	// NetworkDenial is one host the proxy refused, and why.
	NetworkDenial = sandboxv1.NetworkDenial
)

// The seams' errors.
var (
	// ErrNoPolicy is a composition without a sandbox section: nothing may
	// sandbox under it.
	ErrNoPolicy = errors.New("no sandbox policy")
	// ErrUnavailable is a runner that cannot confine the command here (a
	// kernel without the mechanisms, a policy it cannot apply): the
	// command must not run.
	ErrUnavailable = errors.New("sandbox unavailable")
)
