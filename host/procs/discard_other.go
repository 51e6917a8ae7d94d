//go:build !linux

package procs

// discardInput is not done here: an interrupt leaves what was typed ahead
// in the terminal's input queue.
func discardInput(string) error { return nil }
