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

var errMine = errors.New("mine")

func TestToStatusAndBack(t *testing.T) {
	kinds := []Kind{{errMine, codes.InvalidArgument}}
	cause := errors.New("the cause")
	for _, c := range []struct {
		err  error
		code codes.Code
		kind error // what the client reads it as
		text string
	}{
		{fmt.Errorf("outer: %w", Wrap(errMine, cause)), codes.InvalidArgument, errMine, "outer: the cause"},
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
	if ToStatus(nil) != nil || CallError("op", nil) != nil {
		t.Error("nil is not nil")
	}
	if w := Wrap(errMine, cause); !errors.Is(w, cause) || !errors.Is(w, errMine) {
		t.Errorf("wrap loses its cause or kind: %v", w)
	}
}
