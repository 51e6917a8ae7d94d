//go:build !linux

package main

// noDump is Linux's.
func noDump() {}
