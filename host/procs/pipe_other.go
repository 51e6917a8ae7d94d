//go:build !linux

package procs

import "os"

// growPipe does nothing: only Linux lets a pipe's capacity be raised
// (F_SETPIPE_SZ); elsewhere pouring streams are read in bigger chunks only.
func growPipe(*os.File) {}
