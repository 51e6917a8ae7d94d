// Package hangs runs past the -timeout it is tested with (3s): the test
// binary dies while TestHangs runs, so it never ends.
package hangs

import (
	"testing"
	"time"
)

func TestHangs(t *testing.T) {
	t.Log("waiting")
	time.Sleep(time.Minute)
}
