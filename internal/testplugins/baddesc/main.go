// Command dsh-baddesc handshakes but cannot describe itself: it names a
// service for its key that it never registers, so its Describe fails.
package main

import (
	"context"
	"encoding/json"

	"github.com/dshrun/dsh/sdk"
)

type baddesc struct{}

func (baddesc) Describe() sdk.Description {
	return sdk.Description{
		Name:     "baddesc",
		Version:  "0.0.1",
		Provides: []sdk.Provide{{Key: "missing", Services: []string{"dsh.missing.v1.Missing"}}},
	}
}

func (baddesc) Apply(context.Context, *sdk.Host, json.RawMessage) error { return nil }

func main() { sdk.Serve(baddesc{}) }
