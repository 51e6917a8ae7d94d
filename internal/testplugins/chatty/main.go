// Command dsh-chatty writes to stdout before its handshake, which breaks
// the go-plugin protocol: the host must refuse it and leave nothing running.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dshrun/dsh/sdk"
)

type chatty struct{}

func (chatty) Describe() sdk.Description { return sdk.Description{Name: "chatty"} }

func (chatty) Apply(context.Context, *sdk.Host, json.RawMessage) error { return nil }

func main() {
	fmt.Println("hello from a plugin that talks too early")
	sdk.Serve(chatty{})
}
