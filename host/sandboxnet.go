package host

import "github.com/dshrun/dsh/host/netproxy"

// logNetwork logs one connection or request a proxied sandboxed command
// attempted (confine's proxies call it): what it reached, or what was
// refused and by which rule, under the owner whose command it was.
func (h *Host) logNetwork(e netproxy.Event) {
	args := []any{"owner", e.Owner, "host", e.Host, "port", e.Port, "method", e.Method, "rule", e.Rule}
	switch {
	case !e.Allowed:
		h.log.Info("network refused", args...)
	case e.Err != "":
		h.log.Info("network refused", append(args, "error", e.Err)...)
	default:
		h.log.Info("network reached", append(args, "addr", e.Addr, "bytes", e.Bytes)...)
	}
}
