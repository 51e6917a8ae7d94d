package procs

import "github.com/dshrun/dsh/host/watchdog"

// WatchdogArg is the watchdog's first argument (dsh_watchdog __watchdog
// DIR; the dsh binary takes it as a hidden subcommand too). The
// watchdog exists on Linux only (watchdog_linux.go): it kills the host's
// cgroup when the host dies. Where there are no cgroups StartWatchdog does
// nothing and RunWatchdog fails; on Windows each command's Job Object,
// which kills its processes when its last handle closes, takes its place
// (watchdog_windows.go).
const WatchdogArg = watchdog.Arg
