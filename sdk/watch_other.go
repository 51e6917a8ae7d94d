//go:build !linux

package sdk

import (
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
)

// watchHost polls the parent process: elsewhere there is no parent-death
// signal, so this watch is the only guard against an orphaned plugin.
func watchHost(logger hclog.Logger, l *lifecycle) {
	pid, err := strconv.Atoi(os.Getenv(EnvHostPID))
	if err != nil || pid <= 1 {
		return
	}
	for range time.Tick(500 * time.Millisecond) {
		if os.Getppid() != pid {
			l.onHostGone(logger)
			return
		}
	}
}
