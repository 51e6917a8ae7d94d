// Command dsh-newproto is a plugin built for a protocol version newer than
// the host speaks: the host must refuse it with both versions named.
package main

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/sdk"
)

type newer struct{ plugin.NetRPCUnsupportedPlugin }

func (newer) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }
func (newer) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("unused")
}

func main() {
	hs := sdk.Handshake
	hs.ProtocolVersion = sdk.ProtocolVersion + 1
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  hs,
		VersionedPlugins: map[int]plugin.PluginSet{sdk.ProtocolVersion + 1: {sdk.PluginName: newer{}}},
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}
