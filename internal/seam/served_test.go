package seam

import (
	"context"
	"errors"
	"testing"
)

func TestServingOwner(t *testing.T) {
	refusal := errors.New("serves no agent")
	ctx := context.Background()
	if o, err := Serving(nil).Owner(ctx, refusal); o != "" || err != refusal {
		t.Errorf("no Serving: %q %v", o, err)
	}
	none := Serving(func(context.Context) (Served, bool) { return Served{}, false })
	if o, err := none.Owner(ctx, refusal); o != "" || err != refusal {
		t.Errorf("a request that serves no call: %q %v", o, err)
	}
	agent := Serving(func(context.Context) (Served, bool) { return Served{Owner: "agent", Call: "c1"}, true })
	if o, err := agent.Owner(ctx, refusal); o != "agent" || err != nil {
		t.Errorf("an agent's call: %q %v", o, err)
	}
	if s, ok := agent.Of(ctx); !ok || s != (Served{Owner: "agent", Call: "c1"}) {
		t.Errorf("of an agent's call: %+v %v", s, ok)
	}
}
