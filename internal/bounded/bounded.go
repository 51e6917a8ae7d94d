// Package bounded holds the tests' bounded waits: a wait on a channel that
// fails naming what did not come, instead of hanging until the test
// binary's own timeout on a loaded machine.
package bounded

import (
	"testing"
	"time"
)

// Bound bounds each wait: generous for a loaded machine.
const Bound = 60 * time.Second

// Receive is one value from ch within Bound; what names it.
func Receive[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Bound):
		tb.Fatalf("%s: nothing within %v", what, Bound)
		panic("unreachable")
	}
}
