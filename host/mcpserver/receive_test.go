package mcpserver

import (
	"testing"
	"time"
)

// receiveBound bounds each wait of these tests on a channel: generous for
// a loaded machine, and a failure that names what did not come instead of
// a hang until the test binary's own timeout.
const receiveBound = 60 * time.Second

// receiveWithin is one value from ch within receiveBound; what names it.
func receiveWithin[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(receiveBound):
		tb.Fatalf("%s: nothing within %v", what, receiveBound)
		panic("unreachable")
	}
}
