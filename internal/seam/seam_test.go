package seam

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/sdk"
)

var (
	errMine = errors.New("mine")
	// errSpecial is a case of errMine, told apart by its reason.
	errSpecial = Refine(errMine, "SPECIAL")
)

func TestToStatusAndBack(t *testing.T) {
	kinds := []Kind{{Err: errSpecial, Code: codes.InvalidArgument, Reason: "SPECIAL"}, {Err: errMine, Code: codes.InvalidArgument}}
	cause := errors.New("the cause")
	for _, c := range []struct {
		err  error
		code codes.Code
		kind error // what the client reads it as
		text string
	}{
		{fmt.Errorf("outer: %w", Wrap(errMine, cause)), codes.InvalidArgument, errMine, "outer: the cause"},
		{New(errSpecial, "special"), codes.InvalidArgument, errSpecial, "special"},
		{New(sdk.ErrPermissionDenied, "no"), codes.PermissionDenied, sdk.ErrPermissionDenied, "op: no"},
		{New(sdk.ErrUnimplemented, "none"), codes.Unimplemented, sdk.ErrUnimplemented, "op: none"},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), codes.DeadlineExceeded, sdk.ErrDeadline, "op: wait: context deadline exceeded"},
		{context.Canceled, codes.Canceled, nil, "op: context canceled"},
		{sdk.HostError(codes.Unavailable, sdk.ReasonNotProvided, "nobody"), codes.Unavailable, sdk.ErrNotProvided, "op: nobody"},
		{errors.New("plain"), codes.Internal, nil, "op: plain"},
	} {
		st := ToStatus(c.err, kinds...)
		if status.Code(st) != c.code {
			t.Errorf("%v: code %v, want %v", c.err, status.Code(st), c.code)
		}
		back := CallError("op", st, kinds...)
		if (c.kind != nil && !errors.Is(back, c.kind)) || back.Error() != c.text {
			t.Errorf("%v: back as %q, want %q of kind %v", c.err, back, c.text, c.kind)
		}
	}
	// The reason tells the case apart; the case is its kind too, and a
	// client that knows only the kind reads it as that.
	special := ToStatus(New(errSpecial, "special"), kinds...)
	if back := CallError("op", special, kinds...); !errors.Is(back, errSpecial) || !errors.Is(back, errMine) {
		t.Errorf("the case comes back as %v", back)
	}
	if back := CallError("op", special, Kind{Err: errMine, Code: codes.InvalidArgument}); !errors.Is(back, errMine) || back.Error() != "special" {
		t.Errorf("to a client that knows only its kind, the case comes back as %v", back)
	}
	if back := CallError("op", ToStatus(New(errMine, "plain"), kinds...), kinds...); errors.Is(back, errSpecial) || !errors.Is(back, errMine) {
		t.Errorf("the kind comes back as its case: %v", back)
	}
	if ToStatus(nil) != nil || CallError("op", nil) != nil {
		t.Error("nil is not nil")
	}
	if w := Wrap(errMine, cause); !errors.Is(w, cause) || !errors.Is(w, errMine) {
		t.Errorf("wrap loses its cause or kind: %v", w)
	}
}
