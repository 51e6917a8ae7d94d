//go:build linux

package kubetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no server goroutine outlives its Close. client-go's
// WebSocket ping loop is let go: after a cancelled exec it ends only at its
// next ping, up to five seconds later.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"))
}
