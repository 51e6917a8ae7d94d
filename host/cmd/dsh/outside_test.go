package main

import (
	"os"
	"testing"
)

// outsideTmp is a folder outside the host's /tmp, removed after the test:
// a confined command's /tmp is its owner's own, so a write under the
// host's /tmp lands there and is no write outside the workspace.
func outsideTmp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "dsh-outside-")
	if err != nil {
		t.Fatalf("a folder outside /tmp: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
