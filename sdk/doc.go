// Package sdk is what a dsh plugin imports. It owns the plugin side of the
// wire contract: the go-plugin handshake (gRPC only, mutual TLS with the
// certificates the host hands over, or AutoMTLS without them: tls.go;
// negotiated protocol versions), the Lifecycle service, the connection back
// to the host and the watch on the host process. A plugin's main is one call:
//
//	func main() { sdk.Serve(&myPlugin{}) }
//
// A plugin implements [Plugin] and opts into more by having the methods of
// [Registrar] (serve gRPC services it provides), [Disposer], [Releaser] and
// [HealthChecker]. The sdk never starts processes for the plugin and never
// talks to other plugins directly: every call to another plugin's service goes
// through the host, which checks that the key was declared in Inject.
//
// A plugin runs its Go code on one processor (GOMAXPROCS 1) unless its
// environment sets GOMAXPROCS: a plugin relays calls, and measured over a
// foreground command it then spends a fifth less CPU and wakes its threads
// a third as often, so each hop after an idle spell costs less. A plugin that
// computes in parallel calls runtime.GOMAXPROCS itself, in Apply.
//
// The watch on the host is OS-specific: on Linux it waits on the host's
// pidfd, elsewhere it polls the parent pid (watch_*.go).
package sdk
