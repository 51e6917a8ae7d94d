package subprocess

// WatchdogArg is the hidden dsh subcommand that runs the watchdog. The
// watchdog exists on Linux only (watchdog_linux.go): it kills the host's
// cgroup when the host dies. Where there are no cgroups StartWatchdog does
// nothing and RunWatchdog fails; on Windows a Job Object that kills its
// processes when its last handle closes will take its place.
const WatchdogArg = "__watchdog"
