// Command dsh-noop is the smallest plugin: it provides and needs nothing.
// Benchmarks use it to measure what a composition costs over bare starts.
package main

import (
	"context"
	"encoding/json"

	"github.com/dshrun/dsh/sdk"
)

type noop struct{}

func (noop) Describe() sdk.Description {
	return sdk.Description{Name: "noop", Version: "0.0.1", Summary: "does nothing"}
}

func (noop) Apply(context.Context, *sdk.Host, json.RawMessage) error { return nil }

func main() { sdk.Serve(noop{}) }
