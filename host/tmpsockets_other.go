//go:build !linux

package host

// sweepTmpSockets needs the kernel's table of bound sockets to never take
// a live one for dead (tmpsockets_linux.go); elsewhere what a killed host
// left in the temporary directory stays there.
func sweepTmpSockets(string) {}
