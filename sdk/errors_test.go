package sdk

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestFromRPC(t *testing.T) {
	cases := []struct {
		name string
		err  error
		kind error
		msg  string
	}{
		{"host: no provider", HostError(codes.Unavailable, ReasonNotProvided, `no provider of "shell" is active`), ErrNotProvided, `no provider of "shell" is active`},
		{"host: provider gone", HostError(codes.Unavailable, ReasonProviderGone, "plugin exited"), ErrProviderGone, "plugin exited"},
		{"host: unknown service", HostError(codes.Unimplemented, ReasonUnknownService, "no plugin serves x.Y"), ErrUnknownService, "no plugin serves x.Y"},
		{"provider: unknown method", status.Error(codes.Unimplemented, "unknown method Exec"), ErrUnimplemented, "unknown method Exec"},
		{"transport: unavailable", status.Error(codes.Unavailable, "connection reset"), ErrProviderGone, "connection reset"},
		{"denied", status.Error(codes.PermissionDenied, "did not declare"), ErrPermissionDenied, "did not declare"},
		{"deadline", status.Error(codes.DeadlineExceeded, "late"), ErrDeadline, "late"},
		{"local deadline", context.DeadlineExceeded, ErrDeadline, "context deadline exceeded"},
		{"wrapped", fmt.Errorf("shell exec: %w", status.Error(codes.PermissionDenied, "no")), ErrPermissionDenied, "no"},
	}
	for _, c := range cases {
		got := FromRPC(c.err)
		if !errors.Is(got, c.kind) || got.Error() != c.msg {
			t.Errorf("%s: FromRPC = %v (is %v: %v), want kind %v and %q", c.name, got, c.kind, errors.Is(got, c.kind), c.kind, c.msg)
		}
		for _, other := range []error{ErrNotProvided, ErrProviderGone, ErrUnimplemented, ErrUnknownService, ErrPermissionDenied, ErrDeadline} {
			if other != c.kind && errors.Is(got, other) {
				t.Errorf("%s: also %v", c.name, other)
			}
		}
	}
	// Outside the vocabulary: the message, no kind; plain errors pass.
	if got := FromRPC(status.Error(codes.InvalidArgument, "empty command")); got.Error() != "empty command" || errors.Is(got, ErrUnimplemented) {
		t.Errorf("invalid argument: %v", got)
	}
	plain := errors.New("plain")
	if FromRPC(plain) != plain || FromRPC(nil) != nil {
		t.Error("plain errors and nil must pass through")
	}
}
