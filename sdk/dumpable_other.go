//go:build !linux

package sdk

// noDump is Linux's.
func noDump() {}
