// Package mixed holds one test of each outcome, for the reporter's tests:
// go test -json here is what make test reads.
package mixed

import "testing"

func TestPass(t *testing.T) { t.Log("said only when asked") }

func TestFail(t *testing.T) {
	t.Log("first line of the log")
	t.Error("the failure\nover two lines")
}

func TestSkip(t *testing.T) {
	t.Log("a note before the reason")
	t.Skip("frobnicate is not installed (apt-get install frobnicate)")
}

func TestParent(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("skipped", func(t *testing.T) { t.Skipf("needs %s", "/proc") })
}
