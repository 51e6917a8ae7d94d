package sdk

import (
	"runtime"

	"google.golang.org/grpc"
)

// Every connection between a host and its plugins is one local socket
// carrying small calls, one at a time more often than not. gRPC's default
// is a 64 KiB window that it resizes by estimating the bandwidth-delay
// product, and the estimate costs a PING and its ack on most data frames:
// two more writes and wake-ups per call, on both sides. A fixed window as
// large as the estimator could ever grow it turns the estimator off.
const (
	streamWindow = 4 << 20
	connWindow   = 16 << 20
)

// MaxRequest is the largest MCP message the host takes (the stdio frame
// limit, the go-sdk's own): a tool call's arguments, and so a command, are
// never larger.
const MaxRequest = 16 << 20

// MaxMessage is the largest message on a host-plugin connection, either
// way: a whole MCP request on every hop (tool plugin, host, executor,
// ctx.subprocess), with room for what a hop adds around it (environment,
// ids). gRPC's default is 4 MiB received.
const MaxMessage = MaxRequest + 1<<20

// ServerOptions are the transport options of every gRPC server on a
// host-plugin connection: the plugin's own and the host's for a plugin.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessage),
		grpc.MaxSendMsgSize(MaxMessage),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		// A call is served on a waiting goroutine, not a new one: ~30 µs
		// less per call arriving after an idle spell, measured here. A
		// call that finds every worker busy still gets a goroutine.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
}

// DialOptions are the transport options of every gRPC client on a
// host-plugin connection.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
	}
}
