package sdk

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// EnvCPUProfile names a directory a plugin writes its CPU profile to, as
// ID.PID.pprof, from its start until it stops serving (for go tool pprof).
// The host passes it on to its plugins when it is set in its own
// environment; unset (the default), nothing is profiled.
const EnvCPUProfile = "DSH_PLUGIN_CPU_PROFILE"

// startCPUProfile starts the profile EnvCPUProfile asks for and returns
// what stops it; a profile that cannot be written is logged, never fatal.
func startCPUProfile(logf func(msg string, args ...any)) (stop func()) {
	dir := os.Getenv(EnvCPUProfile)
	if dir == "" {
		return func() {}
	}
	id := os.Getenv("DSH_PLUGIN_ID")
	if id == "" {
		id = filepath.Base(os.Args[0])
	}
	path := filepath.Join(dir, fmt.Sprintf("%s.%d.pprof", id, os.Getpid()))
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		logf("CPU profile not written", "path", path, "error", err)
		if f != nil {
			_ = f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
