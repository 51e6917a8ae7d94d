package sdk

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
)

// registered is what a plugin's Register put on its server: each service
// with its methods, as gRPC reports them.
type registered map[string]grpc.ServiceInfo

// registeredBy calls r.Register on s and returns what it added, so the
// services go-plugin and the SDK register themselves never count as the
// plugin's.
func registeredBy(r Registrar, s *grpc.Server) registered {
	before := s.GetServiceInfo()
	r.Register(s)
	out := registered{}
	for name, info := range s.GetServiceInfo() {
		if _, ok := before[name]; !ok {
			out[name] = info
		}
	}
	return out
}

// provides turns the description's Provides into the wire form, each key
// with its gRPC services and their method kinds. A key that lists no
// services gets every registered service no other key lists; services a
// key lists must be registered. Registered services no key claims are the
// plugin's own (a tool handler the host calls back), not a key's.
func (d Description) provides(reg registered) ([]*pluginv1.Provide, error) {
	claimed := map[string]bool{}
	var open []string // keys that leave their services to be derived
	for _, p := range d.Provides {
		if len(p.Services) == 0 {
			open = append(open, p.Key)
			continue
		}
		for _, svc := range p.Services {
			if _, ok := reg[svc]; !ok {
				return nil, fmt.Errorf("plugin %q: key %q declares gRPC service %q, which the plugin does not register (its Register(*grpc.Server) registers %s)",
					d.Name, p.Key, svc, list(reg.names()))
			}
			claimed[svc] = true
		}
	}
	var rest []string
	for _, svc := range reg.names() {
		if !claimed[svc] {
			rest = append(rest, svc)
		}
	}
	if len(open) > 1 && len(rest) > 0 {
		return nil, fmt.Errorf("plugin %q: keys %s list no Services and it registers %s: say in Provide.Services which service implements which key",
			d.Name, list(open), list(rest))
	}
	var out []*pluginv1.Provide
	for _, p := range d.Provides {
		services := p.Services
		if len(services) == 0 {
			services = rest
		}
		wp := &pluginv1.Provide{Key: p.Key, GrpcServices: slices.Clone(services), CallerState: p.CallerState}
		for _, svc := range services {
			for _, m := range reg[svc].Methods {
				wp.Methods = append(wp.Methods, &pluginv1.Method{
					Name:            "/" + svc + "/" + m.Name,
					ClientStreaming: m.IsClientStream,
					ServerStreaming: m.IsServerStream,
				})
			}
		}
		sort.Slice(wp.Methods, func(i, j int) bool { return wp.Methods[i].Name < wp.Methods[j].Name })
		out = append(out, wp)
	}
	return out, nil
}

func (r registered) names() []string {
	names := make([]string, 0, len(r))
	for name := range r {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func list(names []string) string {
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}
