// Package panics dies in a test.
package panics

import "testing"

func TestPanics(t *testing.T) {
	t.Log("before the panic")
	panic("boom")
}
