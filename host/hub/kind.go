package hub

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/dshrun/dsh/core/lifecycle"
)

// Kind is how a method is relayed.
type Kind int

const (
	Unknown   Kind = iota // not compiled into the host: a third party's seam
	Unary                 // one request, one reply
	Streaming             // a stream either way
)

// Kinds are the method kinds a provider's description gave; methods it
// did not list fall back to the contracts linked into the host.
type Kinds map[string]Kind

// DescribedKinds reads the method kinds a provider's description gives
// for its services (SDK plugins say them, so the host relays a third
// party's contract as well as its own).
func DescribedKinds(p *lifecycle.Provide) Kinds {
	if len(p.Methods) == 0 {
		return nil
	}
	kinds := make(Kinds, len(p.Methods))
	for _, m := range p.Methods {
		if !slices.Contains(p.GrpcServices, ServiceOf(m.Name)) {
			continue // a key's methods are its services' only
		}
		if m.ClientStreaming || m.ServerStreaming {
			kinds[m.Name] = Streaming
		} else {
			kinds[m.Name] = Unary
		}
	}
	return kinds
}

// Of is the kind of method: as described, else as linked.
func (k Kinds) Of(method string) Kind {
	if kind, ok := k[method]; ok {
		return kind
	}
	return methodKind(method)
}

// methodKind says whether method is known (its protobuf contract is
// compiled into the host) to be unary or streaming. Unknown methods are
// relayed as streams, which works for every kind.
func methodKind(method string) Kind {
	service, name := ServiceOf(method), method[strings.LastIndexByte(method, '/')+1:]
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return Unknown
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return Unknown
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	switch {
	case md == nil:
		return Unknown
	case md.IsStreamingClient() || md.IsStreamingServer():
		return Streaming
	default:
		return Unary
	}
}
