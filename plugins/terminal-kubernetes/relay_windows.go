package main

import (
	"fmt"
	"os"
)

// relay cannot run here: it needs a Unix terminal (its sizes, its
// signals, a session of its own for the copy stage).
func relay() int {
	fmt.Fprintln(os.Stderr, "dsh: a Kubernetes terminal needs a Unix terminal here, and Windows has none")
	return exitLost
}

// relayCopy is relay's second stage, which relay does not start here.
func relayCopy() int { return relay() }
