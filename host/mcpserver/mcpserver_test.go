package mcpserver

import (
	"fmt"
	"testing"
)

func TestModelTextDropsTransportWords(t *testing.T) {
	inner := fmt.Errorf("provider of shell: %s", "rpc error: code = Unavailable desc = connection refused")
	err := fmt.Errorf("tool %q (plugin tools): rpc error: code = Unknown desc = %v", "bash", inner)
	if got, want := modelText(err), `tool "bash" (plugin tools): provider of shell: connection refused`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
