// Package approval is the service definition of ctx.approval as plugins
// see it: the key, the dsh.approval.v1 contract, and the Go seam over it
// ([Approver]; [Client] implements it over a connection, usually
// sdk.Host.Conn(approval.Key); [NewServer] serves an implementation, and
// only these adapters deal in status codes). The host provides it from the
// composition's approval section (package host/consent).
//
// Asking fails closed: [Ask] turns every failure (no provider, an error, a
// timeout) into a denial that says why, so a caller never runs anything on
// an unanswered question.
package approval

import (
	"context"

	"github.com/dshrun/dsh/core/approval/approvalv1"
)

// Key is the service key: ctx.approval.
const Key = "approval"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = approvalv1.Approval_ServiceDesc.ServiceName

// Kinds of request.
const (
	KindSandboxEscalation = "sandbox_escalation"
	// KindNetworkEscalation asks that one command reach Request.hosts
	// through the sandbox's proxy beyond the policy's allow list.
	KindNetworkEscalation = "network_escalation"
	KindHookAsk           = "hook_ask"
)

// Who decided.
const (
	ByPolicy = "policy"
	ByUser   = "user"
	ByNone   = "none" // nobody could answer: a denial
)

// The messages of the seam, as the contract defines them.
type (
	Request  = approvalv1.ApprovalRequest
	Decision = approvalv1.Decision
)

// Approver is the ctx.approval seam as Go.
type Approver interface {
	Approve(ctx context.Context, req *Request) (*Decision, error)
}

// Ask asks a, failing closed: a missing approver, an error or a deadline
// is a denial whose reason says so.
func Ask(ctx context.Context, a Approver, req *Request) *Decision {
	if a == nil {
		return &Decision{Reason: "denied: this composition has no approval provider (ctx.approval)", DecidedBy: ByNone}
	}
	d, err := a.Approve(ctx, req)
	switch {
	case err != nil:
		return &Decision{Reason: "denied: the approval could not be asked: " + err.Error(), DecidedBy: ByNone}
	case d == nil:
		return &Decision{Reason: "denied: the approval provider gave no answer", DecidedBy: ByNone}
	}
	return d
}
