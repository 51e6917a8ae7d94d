// Package seam is what the gRPC adapters of the first-party seams share:
// errors of a seam's own kinds, the status code each travels as, and the
// translation both ways. Implementations make errors with Wrap or New and
// never see a status code; a seam's Server adapter turns them into codes
// with ToStatus, its Client back into kinds with CallError.
package seam

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/sdk"
)

// Kind is one of a seam's own errors and the code it travels as. A kind
// that shares its code with another one has a Reason, which travels with
// the code (in the status's details) and tells it apart; a client that
// does not know it reads the code alone.
type Kind struct {
	Err    error
	Code   codes.Code
	Reason string
}

// kindError is an error of one kind whose message is its cause's.
type kindError struct {
	kind  error
	cause error
}

func (e *kindError) Error() string { return e.cause.Error() }
func (e *kindError) Unwrap() error { return e.cause }

// Is matches the error's kind, and the kind that one refines.
func (e *kindError) Is(target error) bool { return target == e.kind || errors.Is(e.kind, target) }

// Wrap is err as an error of kind, with err's message.
func Wrap(kind, err error) error { return &kindError{kind, err} }

// New is an error of kind saying msg.
func New(kind error, msg string) error { return Wrap(kind, errors.New(msg)) }

// Refine is a kind named name that is a case of kind: its errors are
// errors of kind too, for a client that knows only kind.
func Refine(kind error, name string) error { return New(kind, name) }

// shared are the kinds every seam's implementations may return besides
// their own: the caller's context, and the sdk vocabulary's refusal and
// missing method.
var shared = []Kind{
	{Err: context.Canceled, Code: codes.Canceled},
	{Err: context.DeadlineExceeded, Code: codes.DeadlineExceeded},
	{Err: sdk.ErrPermissionDenied, Code: codes.PermissionDenied},
	{Err: sdk.ErrUnimplemented, Code: codes.Unimplemented},
}

// ToStatus gives an implementation's error its code: the first of the
// seam's kinds it is, else a shared one, else the code of the status it
// carries (the sdk vocabulary, a call further down), else INTERNAL. The
// message is the error's own.
func ToStatus(err error, kinds ...Kind) error {
	if err == nil {
		return nil
	}
	for _, list := range [][]Kind{kinds, shared} {
		for _, k := range list {
			if errors.Is(err, k.Err) {
				return withReason(status.New(k.Code, err.Error()), k.Reason).Err()
			}
		}
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if st := se.GRPCStatus(); st != nil {
			if _, itself := err.(interface{ GRPCStatus() *status.Status }); itself {
				return st.Err() // the status itself, details and all
			}
			// Wrapped on the way up: the code it came with, the words
			// added since.
			return status.Error(st.Code(), err.Error())
		}
	}
	return status.Error(codes.Internal, err.Error())
}

// CallError is a failed call of operation op in the seam's words: an
// error of the seam's kind whose reason, or else whose code, it came
// with, carrying the other side's message and nothing more; anything else
// in the sdk vocabulary (sdk.FromRPC), the operation named. nil stays nil.
func CallError(op string, err error, kinds ...Kind) error {
	if err == nil {
		return nil
	}
	if k, ok := kindOf(err, kinds...); ok {
		return New(k.Err, sdk.FromRPC(err).Error())
	}
	return fmt.Errorf("%s: %w", op, sdk.FromRPC(err))
}

// kindOf is the kind among kinds of a status error: the one with its
// reason, else the first without a reason that has its code.
func kindOf(err error, kinds ...Kind) (Kind, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return Kind{}, false
	}
	if reason := ReasonOf(st); reason != "" {
		for _, k := range kinds {
			if k.Reason == reason {
				return k, true
			}
		}
	}
	for _, k := range kinds {
		if k.Reason == "" && k.Code == st.Code() {
			return k, true
		}
	}
	return Kind{}, false
}

// ReasonOf is the reason a status carries (in the dsh domain), or "".
func ReasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == sdk.ErrorDomain {
			return info.Reason
		}
	}
	return ""
}

// withReason is st carrying reason, when there is one.
func withReason(st *status.Status, reason string) *status.Status {
	if reason == "" {
		return st
	}
	if with, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: sdk.ErrorDomain}); err == nil {
		return with
	}
	return st
}
