package sdk

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/metadata"
)

// ProtocolVersion is the version of the dsh plugin protocol this SDK speaks.
// go-plugin negotiates it: the host offers the versions it serves and the
// plugin picks the newest one both know.
const ProtocolVersion = 1

// PluginName is the name under which the Lifecycle plugin is dispensed.
const PluginName = "dsh"

// Handshake is shared by the host and every plugin. The cookie only tells a
// binary that it was started by a dsh host; it is not a secret.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "DSH_PLUGIN_COOKIE",
	MagicCookieValue: "dsh-plugin-5f0c7e",
}

// Metadata keys on calls that cross the host.
const (
	// MetaKey names the service key a call is meant for. The SDK sets it on
	// every call made through Host.Conn; a client that omits it is routed by
	// the gRPC service name.
	MetaKey = "dsh-key"
	// MetaCaller carries the entry id of the calling plugin. Only the host
	// sets it (it overwrites whatever the caller sent), so providers can
	// trust it.
	MetaCaller = "dsh-caller"
	// MetaCall carries the id of the tool call a request serves. The host
	// stamps it on each tool call and checks it on every request that
	// carries it on: it stands for the agent that owns the call (its
	// jobs, processes and spill files), which no plugin can name itself.
	// The SDK passes it from a handler's incoming context to the calls the
	// handler makes through Host.Conn.
	MetaCall = "dsh-call"
)

// Environment the host sets for each plugin.
const (
	// EnvHostPID is the pid of the host; the plugin exits when it dies.
	EnvHostPID = "DSH_HOST_PID"
	// EnvPluginID is the composition entry id of the plugin.
	EnvPluginID = "DSH_PLUGIN_ID"
)

// Caller returns the entry id of the plugin that made the call being served,
// or "" when the call did not come through the host.
func Caller(ctx context.Context) string {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ""
	}
	if v := md.Get(MetaCaller); len(v) > 0 {
		return v[0]
	}
	return ""
}
