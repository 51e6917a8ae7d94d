package host

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
)

// Who is calling the host, and what it may reach: the caller behind one
// host server, the capability check every path takes (the hub's relay, the
// core services, Lookup), and dsh.plugin.v1.Host itself.

// caller is the plugin on the other end of one host server.
type caller interface {
	callerID() string
	callerLabel() string
	declares(key string) bool
	// touch records that the caller used key, so the provider is told to
	// release the caller's registrations when the caller goes away.
	touch(key string)
	// addEffect adds an effect to the caller's scope (a registration made
	// with the host).
	addEffect(label string, dispose func(context.Context) error) error
	// self is the caller's process (nil for callers that are not one).
	self() *load
}

type hostService struct {
	pluginv1.UnimplementedHostServer
	h *Host
	c caller
}

func (s *hostService) Lookup(_ context.Context, req *pluginv1.LookupRequest) (*pluginv1.LookupResponse, error) {
	if err := s.h.authorize(s.c, req.Key); err != nil {
		return nil, err
	}
	if isCore(req.Key) {
		return &pluginv1.LookupResponse{Provided: true, Provider: CoreScope, GrpcServices: coreServices[req.Key]}, nil
	}
	ep, ok := s.h.endpoint(req.Key)
	if !ok {
		return &pluginv1.LookupResponse{}, nil
	}
	return &pluginv1.LookupResponse{
		Provided:     true,
		Provider:     ep.id,
		Facts:        ep.facts,
		GrpcServices: ep.serviceList(),
	}, nil
}

// authorize is the capability check: a plugin may reach only the keys it
// declared in its description's inject list.
func (h *Host) authorize(c caller, key string) error {
	if key == "" {
		return status.Error(codes.InvalidArgument, "no service key given")
	}
	if !c.declares(key) {
		return status.Errorf(codes.PermissionDenied,
			"plugin %s did not declare inject %q: add it to its description's Inject list", c.callerLabel(), key)
	}
	return nil
}
