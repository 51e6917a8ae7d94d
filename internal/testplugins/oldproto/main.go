// Command dsh-oldproto is a plugin built for protocol version 0, older than
// any host speaks: the host must refuse it with both versions named.
package main

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/sdk"
)

type old struct{ plugin.NetRPCUnsupportedPlugin }

func (old) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }
func (old) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("unused")
}

func main() {
	hs := sdk.Handshake
	hs.ProtocolVersion = 0
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  hs,
		VersionedPlugins: map[int]plugin.PluginSet{0: {sdk.PluginName: old{}}},
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}
