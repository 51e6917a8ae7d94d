//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Exit codes, stdout and stderr apart, the working directory and the env
// layers reach the command in the pod.
func TestKubernetesRunsCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startPod(t, "web")
	s := serve(t, ctx, composition(srv, "web", ""))
	got, isErr := s.bash(t, ctx, "echo out; echo err >&2; exit 3")
	t.Logf("%q %v", got, isErr)
	got, isErr = s.bash(t, ctx, "echo $HOSTNAME $0 $(pwd) $DSH_EXEC_ID; env | sort")
	t.Logf("%s %v", got, isErr)
	if !strings.Contains(got, "web") {
		t.Fatal(got)
	}
}
