// Package tools is the service definition of ctx.tools: the key, the
// dsh.tools.v1 contract (Tools, served by the host; ToolHandler, served by
// each plugin that registers tools), and the Go seam over it: [Registrar]
// and [Handler] with the seam's errors, a Client of each over a connection
// and a Server adapter of each around an implementation (only the adapters
// deal in status codes). The host's registry is package host/toolset.
package tools

import (
	"context"
	"errors"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/internal/seam"
)

// Key is the service key: ctx.tools.
const Key = "tools"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = toolsv1.Tools_ServiceDesc.ServiceName

// Registrar is ctx.tools as a plugin calls it (dsh.tools.v1.Tools). A
// registration is an effect of the calling plugin, withdrawn when it goes
// away; the plugin must serve the tool's calls (Handler). Errors are the
// seam's own (ErrInvalid, ErrTaken, ErrNotRegistered, ErrCannotRegister),
// sdk.ErrPermissionDenied for a tool the plugin's description does not
// declare, the caller's context error, or the rest of the sdk vocabulary.
type Registrar interface {
	Register(ctx context.Context, spec *ToolSpec) error
	Unregister(ctx context.Context, name string) error
	// Intercept sets the calling plugin's interception of tool calls
	// (replacing its previous one; one with no patterns withdraws it), an
	// effect of its scope like a tool. The plugin must serve Interceptor.
	Intercept(ctx context.Context, in *Interception) error
}

// Interceptor is what a plugin that intercepts tool calls serves
// (dsh.tools.v1.ToolInterceptor). Before decides whether a call runs (and
// with which arguments); After sees its result and may add feedback. An
// error from Before denies the call; one from After is logged.
type Interceptor interface {
	Before(ctx context.Context, req *BeforeCall) (*BeforeDecision, error)
	After(ctx context.Context, req *AfterCall) (*AfterFeedback, error)
}

// Handler is what a plugin that registers tools serves: their calls
// (dsh.tools.v1.ToolHandler). A tool that ran and failed is a CallResult
// with IsError, not an error.
type Handler interface {
	Call(ctx context.Context, req *CallRequest) (*CallResult, error)
}

// The messages of the seam, as the contract defines them.
type (
	ToolSpec    = toolsv1.ToolSpec
	CallRequest = toolsv1.CallRequest
	CallResult  = toolsv1.CallResult
	Resource    = toolsv1.Resource

	Interception    = toolsv1.Interception
	InterceptedCall = toolsv1.InterceptedCall
	BeforeCall      = toolsv1.BeforeCall
	BeforeDecision  = toolsv1.BeforeDecision
	AfterCall       = toolsv1.AfterCall
	AfterFeedback   = toolsv1.AfterFeedback
	Verdict         = toolsv1.Verdict
)

// The verdicts of a Before, weakest first: when several interceptors
// answer, the strongest wins (deny beats ask beats allow).
const (
	VerdictNone  = toolsv1.Verdict_VERDICT_NONE
	VerdictAllow = toolsv1.Verdict_VERDICT_ALLOW
	VerdictAsk   = toolsv1.Verdict_VERDICT_ASK
	VerdictDeny  = toolsv1.Verdict_VERDICT_DENY
)

// The seam's errors: a spec the host cannot take (its name, its schema),
// a name another plugin holds, a tool the caller does not hold, and a
// caller that cannot hold tools (it serves no tool calls, or its scope is
// going).
var (
	ErrInvalid        = errors.New("invalid tool")
	ErrTaken          = errors.New("tool name taken")
	ErrNotRegistered  = errors.New("tool not registered")
	ErrCannotRegister = errors.New("cannot register tools")
)

// Invalid is an ErrInvalid saying msg.
func Invalid(msg string) error { return seam.New(ErrInvalid, msg) }

// Taken is an ErrTaken saying msg.
func Taken(msg string) error { return seam.New(ErrTaken, msg) }

// NotRegistered is an ErrNotRegistered saying msg.
func NotRegistered(msg string) error { return seam.New(ErrNotRegistered, msg) }

// CannotRegister is an ErrCannotRegister saying msg.
func CannotRegister(msg string) error { return seam.New(ErrCannotRegister, msg) }

// Register registers specs with the host reached through conn (usually
// sdk.Host.Conn(tools.Key)). The plugin must serve toolsv1.ToolHandler.
func Register(ctx context.Context, conn grpc.ClientConnInterface, specs ...*ToolSpec) error {
	c := NewClient(conn)
	for _, s := range specs {
		if err := c.Register(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
