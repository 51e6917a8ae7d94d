//go:build !linux

package pluginproc

// exitWatch is empty: without pidfds watchExit polls go-plugin's Exited.
type exitWatch struct{}

func (p *Process) waitKernel(int) bool  { return false }
func (p *Process) kernelSaysGone() bool { return false }
