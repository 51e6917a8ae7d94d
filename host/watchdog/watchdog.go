// Package watchdog is the body of the host's watchdog process: wait until
// the host is gone, then kill its cgroup (see
// host/procs/watchdog_linux.go for who starts it and why). It
// imports only the standard library's basics: it runs as its own small
// binary, dsh_watchdog, so that the process idling next to every host maps
// and touches little (a dsh process at rest is ~25 MiB, mostly the pages of
// its packages' init; this one is ~2 MiB).
package watchdog

// Arg is the argument before the cgroup directory on the watchdog's command
// line (dsh_watchdog __watchdog DIR): it names the process for whoever
// lists them.
const Arg = "__watchdog"

// Binary is the watchdog's file name, next to the dsh binary. It has no
// "dsh-" prefix: that would make it a plugin on the plugin path.
const Binary = "dsh_watchdog"
