package main

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/host/watchdog"
)

// watchdogExe is the watchdog binary next to this one (only Linux runs
// one). Missing, the host says so and runs this binary as its watchdog
// instead (it takes the same arguments): the same guard, at ~20 MiB more
// at rest.
func watchdogExe(logger hclog.Logger) string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	wd := filepath.Join(filepath.Dir(exe), watchdog.Binary+filepath.Ext(exe))
	if _, err := os.Stat(wd); err != nil && runtime.GOOS == "linux" {
		logger.Warn("the watchdog binary is missing next to dsh (make build builds it); dsh itself runs as the watchdog", "want", wd, "error", err)
		return exe
	}
	return wd
}
