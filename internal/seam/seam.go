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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/sdk"
)

// Kind is one of a seam's own errors and the code it travels as.
type Kind struct {
	Err  error
	Code codes.Code
}

// kindError is an error of one kind whose message is its cause's.
type kindError struct {
	kind  error
	cause error
}

func (e *kindError) Error() string        { return e.cause.Error() }
func (e *kindError) Is(target error) bool { return target == e.kind }
func (e *kindError) Unwrap() error        { return e.cause }

// Wrap is err as an error of kind, with err's message.
func Wrap(kind, err error) error { return &kindError{kind, err} }

// New is an error of kind saying msg.
func New(kind error, msg string) error { return Wrap(kind, errors.New(msg)) }

// shared are the kinds every seam's implementations may return besides
// their own: the caller's context, and the sdk vocabulary's refusal and
// missing method.
var shared = []Kind{
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{sdk.ErrPermissionDenied, codes.PermissionDenied},
	{sdk.ErrUnimplemented, codes.Unimplemented},
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
				return status.Error(k.Code, err.Error())
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
// error of the seam's kind whose code it came with, carrying the other
// side's message and nothing more; anything else in the sdk vocabulary
// (sdk.FromRPC), the operation named. nil stays nil.
func CallError(op string, err error, kinds ...Kind) error {
	if err == nil {
		return nil
	}
	err = sdk.FromRPC(err)
	var e *sdk.Error
	if errors.As(err, &e) {
		for _, k := range kinds {
			if e.Code == k.Code {
				return New(k.Err, e.Msg)
			}
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}
