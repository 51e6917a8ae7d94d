//go:build unix

package kubeexec

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// dieOf ends this process by sig, as a local command stopped by it ends.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(time.Second) // the signal is on its way
}
