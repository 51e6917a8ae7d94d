// Package tools is the service definition of ctx.tools: the key, the
// dsh.tools.v1 contract (Tools, served by the host; ToolHandler, served by
// each plugin that registers tools) and a small helper for plugins.
package tools

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/tools/toolsv1"
)

// Key is the service key: ctx.tools.
const Key = "tools"

// ServiceName is the gRPC service the host serves under Key.
var ServiceName = toolsv1.Tools_ServiceDesc.ServiceName

// Register registers specs with the host reached through conn (usually
// sdk.Host.Conn(tools.Key)). The plugin must serve toolsv1.ToolHandler.
func Register(ctx context.Context, conn grpc.ClientConnInterface, specs ...*toolsv1.ToolSpec) error {
	c := toolsv1.NewToolsClient(conn)
	for _, s := range specs {
		if _, err := c.Register(ctx, s); err != nil {
			return fmt.Errorf("register tool %q: %w", s.Name, err)
		}
	}
	return nil
}
