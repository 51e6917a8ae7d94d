package main

import "os"

// detachStdin moves the host's stdin out of reach of plugins: go-plugin
// hands os.Stdin to every plugin it starts, and stdin belongs to the host's
// protocol. Windows passes a child only the handles it is given, so
// pointing os.Stdin at the null device is enough. The returned file reads
// what stdin was.
func detachStdin() (*os.File, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	in := os.Stdin
	os.Stdin = null
	return in, nil
}

// survivePipes does nothing: Windows has no SIGPIPE, a write to a closed
// pipe just fails.
func survivePipes() {}
