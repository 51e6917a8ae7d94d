// Package testplugins holds plugins that exist only for tests and
// benchmarks: a consumer that drives ctx.shellEnv (probe), one that drives
// ctx.terminals (termdrive), a trivial plugin (noop), and broken ones (oldproto speaks an older protocol, newproto a newer one, baddesc cannot describe itself, chatty writes
// to stdout before its handshake). Build them with Build.
//
// The process listings (Running, Matching, Alive) read /proc: on other
// systems they panic, so a test that relies on them cannot pass there
// without checking anything. Tmpfs skips the test where it cannot mount.
package testplugins
