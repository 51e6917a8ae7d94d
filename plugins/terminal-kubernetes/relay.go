package main

import "github.com/dshrun/dsh/plugins/lib/kubeexec"

// relaySpec is what a relay is handed on fd 3: where to open the exec and
// what to run there.
type relaySpec struct {
	Target  kubeexec.Target `json:"target"` // its pod and container resolved
	Command []string        `json:"command"`
	// ID marks the session's processes in the container (Command's id).
	ID string `json:"id"`
}

// The relay's two stages, named by the binary's first arguments.
const (
	argRelay = "relay"    // on the session's terminal: the foreground
	argCopy  = "relay-io" // its child: the exec and the copying
	specFD   = 3          // where the spec comes in
	exitLost = 255        // the connection ended without an exit status
)
