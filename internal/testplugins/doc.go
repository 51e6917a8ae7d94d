// Package testplugins holds plugins that exist only for tests and
// benchmarks: a consumer that drives ctx.shellEnv (probe), a trivial plugin
// (noop), and broken ones (oldproto speaks an older protocol, chatty writes
// to stdout before its handshake). Build them with Build.
package testplugins
