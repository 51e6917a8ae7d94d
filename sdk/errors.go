package sdk

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The error vocabulary of calls that cross the host. Status codes stay on
// the wire: clients turn what they get into one of these with FromRPC and
// test it with errors.Is; where a code alone is ambiguous the host attaches
// a reason (HostError). Nothing parses error text.
var (
	// ErrNotProvided: no plugin provides the key now (it is pending, or
	// the composition has no provider of it).
	ErrNotProvided = errors.New("not provided")
	// ErrProviderGone: the provider exited, hung or is restarting, and
	// the call did not complete.
	ErrProviderGone = errors.New("provider gone")
	// ErrUnimplemented: the provider serves the service but not this
	// method (an older contract).
	ErrUnimplemented = errors.New("method not implemented")
	// ErrUnknownService: nobody serves the service, or the key's provider
	// does not serve it.
	ErrUnknownService = errors.New("unknown service")
	// ErrPermissionDenied: the caller may not make the call (an
	// undeclared key or tool, another owner's job).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrDeadline: the call ran out of time.
	ErrDeadline = errors.New("deadline exceeded")
)

// ErrorDomain marks the reasons the host attaches to its own errors.
const ErrorDomain = "dsh"

// Reasons of errdetails.ErrorInfo the host attaches, where the status code
// alone is ambiguous.
const (
	ReasonNotProvided    = "NOT_PROVIDED"
	ReasonProviderGone   = "PROVIDER_GONE"
	ReasonUnknownService = "UNKNOWN_SERVICE"
)

// Error is a call's failure in the vocabulary: Is matches its kind, Error
// is the message the other side gave (no transport words).
type Error struct {
	Kind error
	Msg  string
	Code codes.Code
	st   *status.Status // as received, with its details
}

func (e *Error) Error() string        { return e.Msg }
func (e *Error) Is(target error) bool { return target == e.Kind }

// GRPCStatus lets an Error travel on as the status it came as.
func (e *Error) GRPCStatus() *status.Status {
	if e.st != nil {
		return e.st
	}
	return status.New(e.Code, e.Msg)
}

// FromRPC turns a gRPC error into the vocabulary: an *Error whose kind is
// one of the Err* values above, or err itself when none fits (its message
// still without the transport's wrapping). nil stays nil.
func FromRPC(err error) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return done // translated already
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: ErrDeadline, Msg: err.Error(), Code: codes.DeadlineExceeded}
	}
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return err
	}
	st := se.GRPCStatus()
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			reason = info.Reason
		}
	}
	kind := error(nil)
	switch {
	case reason == ReasonNotProvided:
		kind = ErrNotProvided
	case reason == ReasonProviderGone:
		kind = ErrProviderGone
	case reason == ReasonUnknownService:
		kind = ErrUnknownService
	case st.Code() == codes.Unimplemented:
		kind = ErrUnimplemented
	case st.Code() == codes.Unavailable:
		kind = ErrProviderGone
	case st.Code() == codes.PermissionDenied:
		kind = ErrPermissionDenied
	case st.Code() == codes.DeadlineExceeded:
		kind = ErrDeadline
	}
	if kind == nil {
		kind = errUnclassified
	}
	return &Error{Kind: kind, Msg: st.Message(), Code: st.Code(), st: st}
}

// errUnclassified is the kind of an error outside the vocabulary.
var errUnclassified = errors.New("unclassified")

// HostError is the status the host sends for one of its own failures, with
// the reason that tells kinds apart where codes do not.
func HostError(code codes.Code, reason, msg string) error {
	st := status.New(code, msg)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); err == nil {
		st = withInfo
	}
	return st.Err()
}
