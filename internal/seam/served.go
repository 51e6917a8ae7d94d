package seam

import "context"

// Served is whom a request to one of the host's own services serves, as
// the host stamped it: the tool call (Call, its id) the request is part
// of, and the agent (Owner) that call serves.
type Served struct {
	Owner string
	Call  string
}

// Serving finds whom a request serves, from what the host stamped on it;
// ok is false for a request that serves no agent's call. A service asks it
// once per request and passes the answer on.
type Serving func(ctx context.Context) (s Served, ok bool)

// Of is whom ctx's request serves; a nil Serving finds no call.
func (f Serving) Of(ctx context.Context) (Served, bool) {
	if f == nil {
		return Served{}, false
	}
	return f(ctx)
}

// Owner is the agent ctx's request serves, or refusal when it serves
// none: the rule of the services whose things belong to agents alone.
func (f Serving) Owner(ctx context.Context, refusal error) (string, error) {
	s, ok := f.Of(ctx)
	if !ok {
		return "", refusal
	}
	return s.Owner, nil
}
