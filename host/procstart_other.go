//go:build !linux

package host

// processStart has no cheap answer here: a runtime directory is named by
// its host's pid alone.
func processStart(int) string { return "" }
